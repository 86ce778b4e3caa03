/**
 * Every provider's manifest schema as the host's form will show it. Providers are found on disk
 * (providers/<name>/package.json, built manifest), so a new provider is checked without being listed.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ADVANCED_KEYWORD, configSchemaUiProblems, FIELD_MAX_LENGTH, GROUP_KEYWORD, HOST_SINGLE_LINE_MAX_LENGTH, SERVER_MAX_LENGTH_KEYWORD } from "./index.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
const providersDir = path.join(repoRoot, "providers");

interface DriverManifest {
  driverKey: string;
  description?: string;
  configSchema?: { properties?: Record<string, Record<string, unknown>> };
}

const providerDirs = fs
  .readdirSync(providersDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && fs.existsSync(path.join(providersDir, entry.name, "package.json")))
  .map((entry) => path.join(providersDir, entry.name));

async function driversOf(dir: string): Promise<{ description?: string; drivers: DriverManifest[] }> {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { paperclipPlugin?: { manifest?: string } };
  const manifestPath = path.join(dir, pkg.paperclipPlugin?.manifest ?? "dist/manifest.js");
  if (!fs.existsSync(manifestPath)) throw new Error(`${manifestPath} is missing: run npm run build`);
  const manifest = ((await import(pathToFileURL(manifestPath).href)) as { default: { description?: string; environmentDrivers?: DriverManifest[] } }).default;
  return { description: manifest.description, drivers: manifest.environmentDrivers ?? [] };
}

describe("every provider's config schema in the host's form", () => {
  it("finds the providers", () => {
    expect(providerDirs.map((dir) => path.basename(dir))).toEqual(expect.arrayContaining(["bubblewrap", "fake-plugin"]));
  });

  for (const dir of providerDirs) {
    const name = path.basename(dir);

    it(`${name}: every field has a title and a group, plain-text descriptions, no list item patterns`, async () => {
      const { description, drivers } = await driversOf(dir);
      expect(drivers.length).toBeGreaterThan(0);
      for (const driver of drivers) {
        const schema = driver.configSchema as Record<string, unknown>;
        expect(configSchemaUiProblems(schema), driver.driverKey).toEqual([]);
        for (const [key, field] of Object.entries(driver.configSchema?.properties ?? {})) {
          expect(typeof field.title, `${driver.driverKey}.${key}`).toBe("string");
          expect(typeof field[GROUP_KEYWORD], `${driver.driverKey}.${key}`).toBe("string");
          const items = field.items as Record<string, unknown> | undefined;
          if (items) expect(items, `${driver.driverKey}.${key} items`).not.toHaveProperty("pattern");
        }
        // The host shows descriptions as plain text.
        expect(driver.description ?? "", driver.driverKey).not.toMatch(/`|\*\*/);
      }
      expect(description ?? "").not.toMatch(/`|\*\*/);
    });

    it(`${name}: every text field has a length bound and every list a most-items bound (no 1 MB image or template)`, async () => {
      const { drivers } = await driversOf(dir);
      for (const driver of drivers) {
        for (const [key, field] of Object.entries(driver.configSchema?.properties ?? {})) {
          const types = [field.type, ...((field.anyOf as Array<Record<string, unknown>> | undefined) ?? []).map((option) => option.type)];
          if (types.includes("string") && field.enum === undefined) {
            const bound = field.maxLength ?? field[SERVER_MAX_LENGTH_KEYWORD];
            expect(bound, `${driver.driverKey}.${key}`).toEqual(expect.any(Number));
            expect(bound as number, `${driver.driverKey}.${key}`).toBeLessThanOrEqual(FIELD_MAX_LENGTH.document);
            // Over 200 the host's form shows a multi-line box: a longer bound is the server's only.
            if (field.maxLength !== undefined) expect(field.maxLength as number, `${driver.driverKey}.${key}`).toBeLessThanOrEqual(HOST_SINGLE_LINE_MAX_LENGTH);
          }
          if (types.includes("array")) expect(field.maxItems, `${driver.driverKey}.${key}`).toEqual(expect.any(Number));
        }
      }
    });

    it(`${name}: main fields come first, outside Advanced options`, async () => {
      const { drivers } = await driversOf(dir);
      for (const driver of drivers) {
        const fieldsOf = Object.values(driver.configSchema?.properties ?? {});
        expect(
          fieldsOf.some((field) => field[ADVANCED_KEYWORD] !== true),
          driver.driverKey,
        ).toBe(true);
      }
    });
  }
});
