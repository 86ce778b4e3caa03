/**
 * The runner app as a template installs it: its files (shipped in this package under
 * dist/runner/) written into `$HOME/.paperclip-runner` by the agent's startup script, which then
 * starts it in the background and waits until it listens. The Terraform example
 * (runner/template/main.tf) does the same; the emulator's templates use this script as is.
 *
 *   node dist/runner-install.js emulator-templates > templates.json   # for CODER_EMULATOR_TEMPLATES
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DEFAULT_RUNNER_SLUG } from "./config.js";

export const RUNNER_PORT = 4100;
// dist/runner/ beside the built module (from the sources, as tests run them: ../dist/runner/).
const RUNNER_DIR = existsSync(new URL("./runner/", import.meta.url)) ? new URL("./runner/", import.meta.url) : new URL("../dist/runner/", import.meta.url);

/** The runner's files (name → JavaScript), as built into dist/runner/. */
export function runnerTemplateFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const name of readdirSync(RUNNER_DIR).sort()) {
    if (name.endsWith(".js")) files[name] = readFileSync(new URL(name, RUNNER_DIR), "utf8");
  }
  if (!files["paperclip-runner.js"]) throw new Error(`the runner app is not built (${fileURLToPath(RUNNER_DIR)}): run npm run build`);
  return files;
}

/** A startup script that installs and starts the runner (idempotent: a runner already listening is kept). */
export function runnerStartupScript(options: { port?: number } = {}): string {
  const port = options.port ?? RUNNER_PORT;
  const lines = ["set -e", 'dir="$HOME/.paperclip-runner"', 'mkdir -p "$dir"', `printf '%s\\n' '{"type":"module"}' > "$dir/package.json"`];
  for (const [name, text] of Object.entries(runnerTemplateFiles())) {
    lines.push(`base64 -d > "$dir/${name}" <<'PAPERCLIP_RUNNER_EOF'`, Buffer.from(text).toString("base64").replace(/.{76}/g, "$&\n"), "PAPERCLIP_RUNNER_EOF");
  }
  lines.push(
    // Keep a runner that already answers on its port. Not by its pid file: that outlives a stop (the
    // home disk is kept) while pids start again with the workspace, so the number can name anything.
    `if node -e "${portOpenCheck(port)}" 2>/dev/null; then exit 0; fi`,
    // Emptied here, not by the background job's redirect: the wait below must not read the last start's line.
    ': >"$dir/log"',
    `PAPERCLIP_RUNNER_PORT=${port} nohup node "$dir/paperclip-runner.js" >>"$dir/log" 2>&1 </dev/null &`,
    'echo $! > "$dir/pid"',
    // Up to a minute: node starts slowly on a loaded machine.
    'i=0; while [ "$i" -lt 600 ]; do grep -q listening "$dir/log" 2>/dev/null && exit 0; i=$((i + 1)); sleep 0.1; done',
    'echo "paperclip-runner did not start:" >&2; cat "$dir/log" >&2; exit 1',
  );
  return `${lines.join("\n")}\n`;
}

/** Node code that exits 0 when something accepts connections on 127.0.0.1:`port`, 1 otherwise (no double quote, `$` or backquote: it goes inside a double-quoted shell word). */
function portOpenCheck(port: number): string {
  return `require('net').connect(${port},'127.0.0.1').on('connect',()=>process.exit(0)).on('error',()=>process.exit(1))`;
}

/** The Coder emulator's template with the runner app (the shape of its `TemplateSpec`). */
export function runnerEmulatorTemplate(name = "paperclip", extra: Record<string, unknown> = {}) {
  return {
    name,
    displayName: "Paperclip runner",
    agent: {
      name: "main",
      startupScript: runnerStartupScript(),
      startupScriptBehavior: "blocking" as const,
      apps: [
        {
          slug: DEFAULT_RUNNER_SLUG,
          displayName: "Paperclip runner",
          url: `http://localhost:${RUNNER_PORT}`,
          share: "owner" as const,
          subdomain: false,
          healthcheck: { url: `http://localhost:${RUNNER_PORT}/healthz`, interval: 2, threshold: 10 },
        },
      ],
    },
    ...extra,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv[2] === "emulator-templates") {
  process.stdout.write(`${JSON.stringify([runnerEmulatorTemplate()], null, 2)}\n`);
}
