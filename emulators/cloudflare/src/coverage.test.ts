// What the stand-in container serves of @cloudflare/sandbox 0.7.21's container clients: every method
// of the installed SDK's clients is classified, and the README's table is current.
import { readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { coverageReport, coverageTable, withCoverageTable } from "@paperclip-sandbox/emulator-kit";
import { sandboxSdkOperations } from "./__fixtures__/sdk-operations.js";
import { CLOUDFLARE_COVERAGE } from "./coverage.js";

describe("coverage", () => {
  it("every method of the SDK's container clients is classified, none is 'not yet', and the README's table is current", () => {
    const operations = sandboxSdkOperations();
    expect(operations.length).toBeGreaterThan(40);
    const report = coverageReport(CLOUDFLARE_COVERAGE, operations);
    expect(report.unclassified).toEqual([]);
    expect(report.stale).toEqual([]);
    expect(report.counts["not yet"]).toBe(0);
    const readmeUrl = new URL("../README.md", import.meta.url);
    const readme = readFileSync(readmeUrl, "utf8");
    // UPDATE_COVERAGE=1 rewrites the README's generated table (between its coverage markers).
    if (process.env.UPDATE_COVERAGE) writeFileSync(readmeUrl, withCoverageTable(readme, coverageTable(report)));
    else expect(readme).toContain(coverageTable(report));
  });
});
