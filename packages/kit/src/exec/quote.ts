/** Quotes one word for POSIX sh: the result is always a single-quoted literal, whatever the input holds. */
export function shellQuote(value: string): string {
  if (value.includes("\0")) {
    throw new Error("cannot pass a NUL byte in a shell argument or environment value");
  }
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
