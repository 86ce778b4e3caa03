import { shellQuote } from "../exec/quote.js";
import type { ScriptRunner } from "../transport.js";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `export NAME='value'` lines for an environment; refuses names a shell cannot hold. */
export function envPrologue(env: Record<string, string> | undefined): string {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(env ?? {})) {
    if (!ENV_NAME.test(key)) throw new Error(`invalid environment variable name: ${JSON.stringify(key)}`);
    lines.push(`export ${key}=${shellQuote(value)}\n`);
  }
  return lines.join("");
}

/** For transports with no env field (pod exec, ssh without AcceptEnv): `io.env` becomes exports at the top of the script. */
export function withInlineEnv(inner: ScriptRunner): ScriptRunner {
  return {
    capabilities: inner.capabilities,
    // A PTY's env is its own (PtySpec.env): the PTY transport inlines it if it must.
    ...(inner.pty ? { pty: inner.pty } : {}),
    run(script, io) {
      if (!io.env || Object.keys(io.env).length === 0) return inner.run(script, io);
      const { env, ...rest } = io;
      return inner.run(envPrologue(env) + script, rest);
    },
  };
}
