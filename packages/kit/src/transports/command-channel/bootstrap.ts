import { shellQuote } from "../../exec/quote.js";
import { NODE_MUX_SOURCE } from "./mux-node.js";

/** The in-sandbox implementations, in the order they are tried. */
export type ChannelImplementation = "node";

export const DEFAULT_IMPLEMENTATIONS: readonly ChannelImplementation[] = ["node"];

/** Exit status of an implementation that cannot run here (too old): the next one is tried. */
const NEXT = 98;

/**
 * The script the channel's one long exec runs: it picks the first implementation the image can run
 * and becomes it. Nothing is read from stdin before an implementation runs (the host sends no
 * request before its hello). With none available it says so (`H 0 …`) and exits.
 */
export function bootstrapScript(stateDirName: string, implementations: readonly ChannelImplementation[] = DEFAULT_IMPLEMENTATIONS): string {
  const dir = `"\${TMPDIR:-/tmp}"/${shellQuote(stateDirName)}`;
  const lines = [`__pc_d=${dir}`];
  for (const implementation of implementations) {
    if (implementation === "node") {
      lines.push(
        `for __pc_n in node nodejs; do`,
        `  command -v "$__pc_n" >/dev/null 2>&1 || continue`,
        `  "$__pc_n" -e ${shellQuote(NODE_MUX_SOURCE)} "$__pc_d"; __pc_rc=$?`,
        `  [ "$__pc_rc" -eq ${NEXT} ] || exit "$__pc_rc"`,
        `done`,
      );
    }
  }
  const tried = implementations.length > 0 ? implementations.map((name) => (name === "node" ? "node or nodejs" : name)).join(", ") : "no implementation allowed";
  lines.push(`printf 'H 0 none runs here (%s)\\n' ${shellQuote(tried)}`);
  return lines.join("\n");
}
