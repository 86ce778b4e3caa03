// The operator's view: for each provider, the real host's Settings -> Environments -> Add environment
// form in headless Chromium (Debian's `chromium`, driven by playwright-core), loopback only.
// Checks what an operator sees: field titles, the Advanced section and its groups, a bad list item
// and a cleared text field, every server error in one message, the probe's warnings after Test,
// and the saved config. Screenshots of each step go to <outDir>/ui/<driverKey>-<n>-<step>.png.
//
// Used by e2e.mjs: `const ui = createUiSession(...)`, `await ui.scenario(p, { step, ... })` per
// provider, `await ui.close()` at the end. A provider takes part through its `ui` entry in providers.mjs.
import fs from "node:fs";
import path from "node:path";

const CHROMIUM_ARGS = [
  "--no-sandbox", // runs as root in CI; the page is our own loopback server
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);
const ACTION_TIMEOUT_MS = 15_000;

/** XPath of the box (label, input, description, error) of the field titled `title`. */
function fieldBoxXpath(title, boxClass) {
  const literal = JSON.stringify(title); // titles hold no double quotes (checked by the caller)
  // A required field's label ends in a "*" of its own (a span): "Bridge URL*".
  const required = JSON.stringify(`${title}*`);
  return `xpath=//label[@data-slot="label" and (normalize-space(.)=${literal} or normalize-space(.)=${required})]/ancestor::div[contains(concat(" ",normalize-space(@class)," ")," ${boxClass} ")][1]`;
}

/**
 * One browser for the whole e2e, started on first use. `baseUrl` is the server's loopback origin;
 * `profileDir` a fresh directory for Chromium's profile (removed by close()).
 */
export function createUiSession({ baseUrl, outDir, profileDir, chromiumPath, check, apiOk, log = console.log }) {
  let context = null;
  let page = null;
  const blocked = new Set();
  const shotsDir = path.join(outDir, "ui");
  const shots = [];

  async function start() {
    if (page) return page;
    if (!fs.existsSync(chromiumPath)) throw new Error(`${chromiumPath} is missing (apt-get install chromium)`);
    const { chromium } = await import("playwright-core");
    fs.mkdirSync(profileDir, { recursive: true });
    fs.mkdirSync(shotsDir, { recursive: true });
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: chromiumPath,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1440, height: 900 },
      timeout: 60_000,
    });
    // Loopback only: anything else the page asks for (fonts, telemetry) is refused and reported.
    await context.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === "data:" || url.protocol === "blob:" || LOOPBACK_HOSTS.has(url.hostname)) return route.continue();
      blocked.add(url.origin);
      return route.abort();
    });
    context.setDefaultTimeout(ACTION_TIMEOUT_MS);
    page = context.pages()[0] ?? (await context.newPage());
    return page;
  }

  /** The whole form: the page scrolls inside a container, so the viewport grows to its height for the shot. */
  async function shot(name) {
    const file = path.join(shotsDir, `${name}.png`);
    const height = await page.evaluate(() => {
      // Runs in the page: its window (this file is typechecked without the DOM library).
      const win = /** @type {any} */ (globalThis);
      const scrollers = [...win.document.querySelectorAll("*")].filter((e) => /auto|scroll/.test(win.getComputedStyle(e).overflowY) && e.scrollHeight > e.clientHeight);
      return Math.max(win.innerHeight, ...scrollers.map((e) => e.scrollHeight - e.clientHeight + win.innerHeight));
    });
    const viewport = page.viewportSize();
    await page.setViewportSize({ width: viewport.width, height: Math.min(height, 8000) });
    await page.screenshot({ path: file, fullPage: true });
    await page.setViewportSize(viewport);
    shots.push(file);
    return path.basename(file);
  }

  const box = (title) => page.locator(fieldBoxXpath(title, "space-y-2"));
  const listBox = (title) => page.locator(fieldBoxXpath(title, "space-y-4"));
  const button = (name) => page.getByRole("button", { name, exact: true });
  const visibleLabels = async () =>
    // A required field's label ends in its "*" marker.
    new Set(await page.locator('label[data-slot="label"]').evaluateAll((els) => els.filter((e) => e.offsetParent !== null).map((e) => e.textContent.trim().replace(/\s*\*$/, ""))));

  async function typeInto(title, value) {
    // A secret field (format secret-ref) shows its raw-value input only after this button.
    const raw = box(title).getByRole("button", { name: "Or paste a raw value", exact: true });
    if ((await raw.count()) > 0) await raw.click();
    const input = box(title).locator("input");
    await input.fill(String(value));
  }
  /** Types a value and deletes it again, as an operator would: the form then holds "". */
  async function typeAndClear(title) {
    const input = box(title).locator("input");
    await input.fill("/tmp/typed-then-cleared");
    await input.press("Control+A");
    await input.press("Delete");
    check((await input.inputValue()) === "", `${title}: the input is not empty after clearing`);
  }
  async function addItem(title, value) {
    const list = listBox(title);
    await list.getByRole("button", { name: /^Add/ }).click();
    await list.locator("input").last().fill(value);
  }
  async function setItem(title, index, value) {
    await listBox(title).locator("input").nth(index).fill(value);
  }
  async function choose(title, option) {
    await box(title).getByRole("combobox").click();
    await page.getByRole("option", { name: option, exact: true }).click();
  }
  /** The text the form shows under its fields after a Create or Test: the server's error, or the probe summary. */
  async function formMessage(kind) {
    const selector = kind === "error" ? "div.text-xs.text-destructive" : "div.text-xs.text-green-600, div.text-xs.text-destructive";
    const el = page.locator(selector).last();
    await el.waitFor({ state: "visible" });
    return (await el.innerText()).trim();
  }

  /** The form's last message now, or "" when there is none. */
  async function formMessageNow() {
    const el = page.locator("div.text-xs.text-green-600, div.text-xs.text-destructive").last();
    return (await el.count()) ? (await el.innerText()).trim() : "";
  }

  /** The form's message once it differs from `before` and the Test button is back. */
  async function waitForChange(before, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const testing = await page.getByRole("button", { name: "Testing..." }).count();
      const now = await formMessageNow();
      if (!testing && now && now !== before) return now;
      await page.waitForTimeout(100);
    }
    throw new Error(`no new form message within ${timeoutMs} ms (still ${JSON.stringify(before.slice(0, 120))})`);
  }

  /**
   * One provider's form. `p.ui` (providers.mjs) says what to enter:
   *   fill        { title: value } typed into text/number fields (e.g. a state dir)
   *   cleared     titles of optional text fields typed in and cleared ("" must mean unset)
   *   badItems    [{ list: title, value }] invalid list items; the server's one message must name each
   *   goodItems   { list title: value } what replaces each bad item before Test
   *   choose      { title: option } select fields
   *   probe       RegExp the Test summary must match (the probe's warnings, in words)
   *   saved(cfg)  string[] of problems with the saved config (empty when right)
   */
  async function scenario(p, { step, companyId, schema, driverDescription, onEnvironment }) {
    const ui = p.ui;
    const key = p.driverKey;
    const properties = schema?.properties ?? {};
    const titleOf = (k) => properties[k]?.title;
    const name = `ui-${key}-${Date.now()}`;
    let n = 0;
    const next = (label) => `${key}-${++n}-${label}`;

    const opened = await step("ui: Add environment form shows every field by its title", async () => {
      await start();
      for (const [k, field] of Object.entries(properties)) {
        check(typeof field.title === "string" && !field.title.includes('"'), `field ${k} has no usable title`);
      }
      const company = await apiOk("GET", `/companies/${companyId}`);
      await page.goto(`${baseUrl}/${company.issuePrefix}/company/settings/instance/environments/new`, { waitUntil: "networkidle" });
      await page.locator("select").first().selectOption("sandbox");
      await page.locator("select").nth(1).selectOption(key);
      // Name is the host's own field (not from the schema): the first text input of the form.
      await page.locator("input[type=text]").first().fill(name);
      const advanced = Object.entries(properties).filter(([, f]) => f["x-paperclip-advanced"] === true);
      const main = Object.entries(properties).filter(([, f]) => f["x-paperclip-advanced"] !== true);
      const before = await visibleLabels();
      const missing = main.filter(([, f]) => !before.has(f.title)).map(([k]) => k);
      check(missing.length === 0, `main fields without their title on screen: ${missing.join(", ")}`);
      const early = advanced.filter(([, f]) => before.has(f.title)).map(([k]) => k);
      check(early.length === 0, `advanced fields shown before opening Advanced options: ${early.join(", ")}`);
      const undescribed = [];
      for (const [k, f] of main) {
        if (typeof f.description === "string" && (await page.getByText(f.description, { exact: true }).count()) === 0) undescribed.push(k);
      }
      check(undescribed.length === 0, `main fields whose description is not shown as written: ${undescribed.join(", ")}`);
      if (properties.reuseLease) {
        check(/warm/.test(properties.reuseLease.description ?? ""), `the reuseLease description does not say the host also needs runnerLifecycleMode "warm"`);
      }
      if (driverDescription) {
        check(!driverDescription.includes("`"), `the provider description has backticks, shown literally: ${driverDescription}`);
        await page.getByText(driverDescription, { exact: true }).waitFor({ state: "visible" });
      }
      return { detail: `${main.length} main fields by title; ${await shot(next("form"))}` };
    });
    if (!opened) return;

    await step("ui: Advanced options holds tuning, paths and fault injection, by group", async () => {
      await button("Advanced options").click();
      const after = await visibleLabels();
      const advanced = Object.entries(properties).filter(([, f]) => f["x-paperclip-advanced"] === true);
      const missing = advanced.filter(([, f]) => !after.has(f.title)).map(([k]) => k);
      check(missing.length === 0, `advanced fields without their title on screen: ${missing.join(", ")}`);
      const groups = [...new Set(advanced.map(([, f]) => f["x-paperclip-group"]))];
      for (const group of groups) {
        const heading = page.locator("div.uppercase", { hasText: new RegExp(`^${group}$`, "i") });
        check((await heading.count()) === 1, `no "${group}" heading under Advanced options`);
      }
      return { detail: `${advanced.length} fields in ${groups.join(", ")}; ${await shot(next("advanced"))}` };
    });

    await step("ui: a bad list item and a cleared text field: buttons stay usable, the server names every problem", async () => {
      for (const [title, value] of Object.entries(ui.fill ?? {})) await typeInto(title, value);
      for (const [title, option] of Object.entries(ui.choose ?? {})) await choose(title, option);
      for (const title of ui.cleared ?? []) await typeAndClear(title);
      for (const { list, value } of ui.badItems ?? []) await addItem(list, value);
      check(await button("Test").isEnabled(), "Test is disabled");
      check(await button("Create environment").isEnabled(), "Create environment is disabled");
      if ((ui.badItems ?? []).length === 0) return { detail: `no list fields; ${await shot(next("entered"))}` };
      await button("Create environment").click();
      const message = await formMessage("error");
      for (const { list, value } of ui.badItems) {
        check(message.includes(`${list}, item 1:`), `the error does not name "${list}, item 1" (for ${JSON.stringify(value)}): ${message}`);
      }
      if (ui.badItems.length > 1) check(message.startsWith(`${ui.badItems.length} problems: `), `not one message for ${ui.badItems.length} problems: ${message}`);
      for (const title of ui.cleared ?? []) check(!message.includes(title), `the cleared field "${title}" is refused: ${message}`);
      check(!/\.\d+:/.test(message) && !/\b[a-z]+[A-Z]\w*:/.test(message), `the error names raw keys or paths: ${message}`);
      return { detail: `"${message.slice(0, 150)}"; ${await shot(next("errors"))}` };
    });

    await step("ui: Test shows the probe's warnings in its summary", async () => {
      for (const [list, value] of Object.entries(ui.goodItems ?? {})) await setItem(list, 0, value);
      for (const [title, value] of Object.entries(ui.probeFill ?? {})) await typeInto(title, value);
      // The previous step's error is still on the form: the summary is the first message after it
      // (waiting only for "Testing..." to go races a click whose state change has not shown yet).
      const before = await formMessageNow();
      await button("Test").click();
      const summary = await waitForChange(before, 130_000);
      check(ui.probe.test(summary), `Test summary ${JSON.stringify(summary)} does not match ${ui.probe}`);
      return { detail: `"${summary.slice(0, 160)}"; ${await shot(next("test"))}` };
    });

    await step("ui: Create saves the config as entered (cleared fields unset)", async () => {
      await button("Create environment").click();
      await page.waitForURL((url) => url.pathname.endsWith("/company/settings/instance/environments"), { timeout: 30_000 });
      const list = await apiOk("GET", `/companies/${companyId}/environments`);
      const env = (Array.isArray(list) ? list : (list?.environments ?? [])).find((e) => e.name === name);
      check(env, `environment ${name} not in the list after Create`);
      onEnvironment?.(env.id);
      const problems = [
        ...(ui.cleared ?? [])
          .map((title) => Object.keys(properties).find((k) => titleOf(k) === title))
          .filter((k) => k && env.config?.[k] !== undefined && env.config[k] === "")
          .map((k) => `${k} saved as ""`),
        ...(ui.saved?.(env.config ?? {}) ?? []),
      ];
      check(problems.length === 0, `${problems.join("; ")} (saved config ${JSON.stringify(env.config)})`);
      // The list shows it (not only the hidden <option> of the default-environment select).
      await page
        .locator(`xpath=//*[not(self::option)][text()[contains(., ${JSON.stringify(name)})]]`)
        .first()
        .waitFor({ state: "visible" });
      return { detail: `saved ${JSON.stringify(env.config).slice(0, 200)}; ${await shot(next("saved"))}` };
    });
  }

  async function close() {
    const summary = { screenshots: shots.length, dir: shotsDir, blocked: [...blocked] };
    if (context) await context.close().catch((error) => log(`  (closing the browser: ${error.message})`));
    context = null;
    page = null;
    fs.rmSync(profileDir, { recursive: true, force: true });
    return summary;
  }

  return { scenario, close };
}
