import type { ScriptRunner } from "../transport.js";

/**
 * Makes `syncFor` choose the file-API strategy for a runner that could also stream.
 *
 * `syncFor` streams tar over stdin whenever the runner is binary-safe with streamed stdin and EOF.
 * Over an exec API where every stdin chunk is a vendor call of its own (envd's SendInput) while the
 * vendor's file API moves a whole archive in one request, that costs one call per chunk instead of
 * two per operation. The returned runner is the same runner; it only tells sync that its stdin gets
 * no EOF, which `syncFor` and the streaming sync check. Execute and duplex channels read the
 * provider's declared (static) transport, never a runner's capabilities, so they are unchanged.
 * Use it only together with a `files` transport: without one, `syncFor` would fall back to base64.
 */
export function preferFileApiSync(runner: ScriptRunner): ScriptRunner {
  return {
    capabilities: Object.freeze({ ...runner.capabilities, stdinEof: false }),
    run: (script, io) => runner.run(script, io),
  };
}
