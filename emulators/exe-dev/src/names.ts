/**
 * exe.dev's VM name rules (boxname.Valid and its deny list), plus the observed refusal of names
 * ending in `-<digits>` (third-party reports: `test-123` is refused, `test-abc` accepted; on by
 * default, off with `trailingDigitsAllowed`).
 */
export const INVALID_NAME_MESSAGE =
  "Invalid VM name. Must be 5-63 characters: start with a lowercase letter, then lowercase letters or digits, with optional single hyphen separators (e.g., a-vm-name).";
export const TRAILING_DIGITS_MESSAGE = "Invalid VM name: it must not end with a hyphen followed only by digits (e.g. test-123); end it with a letter (test-abc).";

const PATTERN = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
/** A sample of exe.dev's reserved names (the full list is long; these cover what automation might pick). */
const RESERVED = new Set([
  "admin",
  "login",
  "proxy",
  "shell",
  "share",
  "setup",
  "token",
  "cloud",
  "server",
  "client",
  "sandbox",
  "container",
  "exedev",
  "whoami",
  "example",
  "hello",
  "world",
  "test-name",
  "box-name",
]);
const DRUG_SPAM = ["adderall", "ambien", "cialis", "viagra", "xanax", "oxycodone", "tramadol", "pharmacy"];

/** The problem with a requested name, or undefined when exe.dev would take it. */
export function vmNameProblem(name: string, opts: { trailingDigitsAllowed?: boolean } = {}): string | undefined {
  if (name.length < 5 || name.length > 63 || !PATTERN.test(name) || DRUG_SPAM.some((word) => name.includes(word))) return INVALID_NAME_MESSAGE;
  if (!opts.trailingDigitsAllowed && /-\d+$/.test(name)) return TRAILING_DIGITS_MESSAGE;
  if (RESERVED.has(name)) return `VM name ${JSON.stringify(name)} is not available`;
  return undefined;
}

/** exe.dev's tag rule (`tag` and `new --tag`). */
export const TAG_PATTERN = /^[a-z][a-z0-9_-]*$/;

const WORDS = ["alpha", "bravo", "delta", "echo", "falcon", "harbor", "island", "kernel", "lagoon", "meteor", "nebula", "orbit", "quasar", "raven", "spruce", "tiger"];

/** A random `word-word` name, as `new` without `--name` picks. */
export function randomVmName(random: () => number = Math.random): string {
  const first = WORDS[Math.floor(random() * WORDS.length)]!;
  let second = first;
  while (second === first) second = WORDS[Math.floor(random() * WORDS.length)]!;
  return `${first}-${second}`;
}
