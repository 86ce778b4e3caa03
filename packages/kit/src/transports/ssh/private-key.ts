/**
 * Checks a pasted SSH private key before it reaches `ssh`, naming the paste mistake when there is
 * one. Mistakes that lose nothing (Windows line ends, a missing final newline, `\n` escapes typed
 * instead of line breaks, indentation) are repaired and reported; the others are refused, because
 * `ssh` would only say "invalid format" or ask for a passphrase it can never get (BatchMode).
 */

export type PrivateKeyCheck =
  /** `key` is what `ssh` gets (LF line ends, final newline); `repaired` names each repair made. */
  { ok: true; key: string; format: PrivateKeyFormat; repaired: string[] } | { ok: false; problem: string };

export type PrivateKeyFormat = "openssh" | "pem" | "pkcs8";

/** The repairs, as `repaired` reports them (stable phrases tests and warnings use). */
export const KEY_REPAIRS = {
  crlf: "it had Windows line ends (CR LF); converted to LF",
  escapedNewlines: "it had literal \\n escapes instead of line breaks (a key pasted from JSON or a .env file); converted to line breaks",
  finalNewline: "it lacked the final newline OpenSSH requires; added",
  joinedLines: "its line breaks were lost (pasted into a one-line field); restored",
  indentation: "its lines were indented or had trailing spaces; trimmed",
} as const;

/** The refusals, as `problem` reports them. */
export const KEY_PROBLEMS = {
  empty: "is empty",
  publicKey: "is a public key (a line starting ssh-ed25519, ssh-rsa, ecdsa-sha2-…); paste the PRIVATE key (the file without .pub, starting -----BEGIN OPENSSH PRIVATE KEY-----)",
  putty: "is a PuTTY .ppk key; convert it with `puttygen key.ppk -O private-openssh -o key` and paste the result",
  encrypted:
    "is encrypted with a passphrase; the provider runs ssh non-interactively and cannot type it. Paste an unencrypted copy (`ssh-keygen -p -N '' -f <copy>`), or use a key made for this purpose",
  noBegin: "is not a private key: no -----BEGIN … PRIVATE KEY----- line",
  noEnd: "is cut off: the -----END … PRIVATE KEY----- line is missing (was only part of the key copied?)",
  labelMismatch: "is damaged: its BEGIN and END lines name different key types",
  badBody: "is damaged: its body is not base64 (was it edited, or are two keys pasted together?)",
  truncatedBody: "is damaged: its body is shorter than an OpenSSH key (was only part of the key copied?)",
} as const;

const PUBLIC_KEY_LINE = /^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)\s+[A-Za-z0-9+/=]+/;
const ARMOR = /^-----(BEGIN|END) ([A-Z0-9 ]+)-----$/;
const BASE64_LINE = /^[A-Za-z0-9+/]+={0,2}$/;
const PEM_HEADER_LINE = /^[A-Za-z][A-Za-z0-9-]*: ?.*$/;
const OPENSSH_MAGIC = Buffer.from("openssh-key-v1\0", "latin1");

export function checkPrivateKey(raw: string): PrivateKeyCheck {
  const repaired: string[] = [];
  let text = raw;
  if (text.trim() === "") return { ok: false, problem: KEY_PROBLEMS.empty };
  if (text.includes("\r")) {
    text = text.replace(/\r\n?/g, "\n");
    repaired.push(KEY_REPAIRS.crlf);
  }
  // A key on one line with backslash-n escapes (JSON strings, .env files): base64 never holds a backslash.
  if (/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\\n/.test(text) || (!text.trim().includes("\n") && text.includes("\\n"))) {
    text = text.replace(/\\r\\n|\\n/g, "\n");
    repaired.push(KEY_REPAIRS.escapedNewlines);
  }
  // A key pasted into a one-line input: the armor, body and footer run together on one line.
  const joined = /^\s*-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----[ \t]*([A-Za-z0-9+/=][A-Za-z0-9+/= \t]*?)[ \t]*-----END ([A-Z0-9 ]*PRIVATE KEY)-----\s*$/.exec(text);
  if (joined && !/Proc-Type:/i.test(text)) {
    const width = joined[1] === "OPENSSH PRIVATE KEY" ? 70 : 64;
    const body = joined[2]!.replace(/\s+/g, "");
    const wrapped = body.match(new RegExp(`.{1,${width}}`, "g")) ?? [];
    text = [`-----BEGIN ${joined[1]}-----`, ...wrapped, `-----END ${joined[3]}-----`, ""].join("\n");
    repaired.push(KEY_REPAIRS.joinedLines);
  }
  const trimmedLines = text.split("\n").map((line) => line.trim());
  const original = text.split("\n");
  if (trimmedLines.some((line, i) => line !== original[i])) repaired.push(KEY_REPAIRS.indentation);
  // Leading and trailing blank lines are not a mistake worth naming.
  while (trimmedLines.length > 0 && trimmedLines[0] === "") trimmedLines.shift();
  const hadFinalNewline = /\n\s*$/.test(text);
  while (trimmedLines.length > 0 && trimmedLines[trimmedLines.length - 1] === "") trimmedLines.pop();
  if (trimmedLines.length === 0) return { ok: false, problem: KEY_PROBLEMS.empty };

  const first = trimmedLines[0]!;
  if (PUBLIC_KEY_LINE.test(first)) return { ok: false, problem: KEY_PROBLEMS.publicKey };
  if (/^PuTTY-User-Key-File-\d+:/.test(first)) return { ok: false, problem: KEY_PROBLEMS.putty };

  const begin = trimmedLines.findIndex((line) => /^-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----$/.test(line));
  if (begin < 0) {
    if (trimmedLines.some((line) => /^-----BEGIN [A-Z0-9 ]*PUBLIC KEY-----$/.test(line) || line.startsWith("---- BEGIN SSH2 PUBLIC KEY"))) {
      return { ok: false, problem: KEY_PROBLEMS.publicKey };
    }
    return { ok: false, problem: KEY_PROBLEMS.noBegin };
  }
  const beginLabel = ARMOR.exec(trimmedLines[begin]!)![2]!;
  const endOffset = trimmedLines.slice(begin + 1).findIndex((line) => /^-----END [A-Z0-9 ]*-----$/.test(line));
  if (endOffset < 0) return { ok: false, problem: KEY_PROBLEMS.noEnd };
  const end = begin + 1 + endOffset;
  const endLabel = ARMOR.exec(trimmedLines[end]!)![2]!;
  if (endLabel !== beginLabel) return { ok: false, problem: KEY_PROBLEMS.labelMismatch };
  if (beginLabel === "ENCRYPTED PRIVATE KEY") return { ok: false, problem: KEY_PROBLEMS.encrypted };

  const inner = trimmedLines.slice(begin + 1, end);
  const headers: string[] = [];
  let bodyStart = 0;
  // PEM (RFC 1421) headers, e.g. `Proc-Type: 4,ENCRYPTED`, then a blank line, then the body.
  while (bodyStart < inner.length && PEM_HEADER_LINE.test(inner[bodyStart]!) && !BASE64_LINE.test(inner[bodyStart]!)) headers.push(inner[bodyStart++]!);
  while (bodyStart < inner.length && inner[bodyStart] === "") bodyStart++;
  const body = inner.slice(bodyStart);
  if (headers.some((header) => /^Proc-Type:\s*4,\s*ENCRYPTED/i.test(header))) return { ok: false, problem: KEY_PROBLEMS.encrypted };
  if (body.length === 0 || !body.every((line) => BASE64_LINE.test(line))) return { ok: false, problem: KEY_PROBLEMS.badBody };

  const format: PrivateKeyFormat = beginLabel === "OPENSSH PRIVATE KEY" ? "openssh" : beginLabel === "PRIVATE KEY" ? "pkcs8" : "pem";
  if (format === "openssh") {
    const problem = opensshBodyProblem(Buffer.from(body.join(""), "base64"));
    if (problem) return { ok: false, problem };
  }
  if (!hadFinalNewline) repaired.push(KEY_REPAIRS.finalNewline);
  const key = [...trimmedLines.slice(begin, end + 1)].join("\n") + "\n";
  return { ok: true, key, format, repaired };
}

/** The openssh-key-v1 container: magic, then cipher name (`none` when unencrypted), KDF, … */
function opensshBodyProblem(blob: Buffer): string | undefined {
  if (blob.length < OPENSSH_MAGIC.length + 4 || !blob.subarray(0, OPENSSH_MAGIC.length).equals(OPENSSH_MAGIC)) {
    return blob.length < OPENSSH_MAGIC.length ? KEY_PROBLEMS.truncatedBody : KEY_PROBLEMS.badBody;
  }
  const nameLength = blob.readUInt32BE(OPENSSH_MAGIC.length);
  const nameStart = OPENSSH_MAGIC.length + 4;
  if (nameStart + nameLength > blob.length) return KEY_PROBLEMS.truncatedBody;
  const cipher = blob.subarray(nameStart, nameStart + nameLength).toString("latin1");
  if (cipher !== "none") return KEY_PROBLEMS.encrypted;
  // An unencrypted key holds at least the KDF name, options, a key count, a public key and the private section.
  if (blob.length < nameStart + nameLength + 64) return KEY_PROBLEMS.truncatedBody;
  return undefined;
}

/** True when a value looks like key material rather than an unresolved secret reference (a UUID). */
export function looksLikeKeyMaterial(value: string): boolean {
  return /PRIVATE KEY|PuTTY-User-Key-File|^\s*(ssh-|ecdsa-sha2-|sk-)|-----BEGIN/.test(value);
}
