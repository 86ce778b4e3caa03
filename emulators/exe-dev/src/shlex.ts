/** Thrown for a command line the lexer cannot split (exe.dev answers 400 "invalid command syntax"). */
export class ShlexError extends Error {}

/**
 * Splits a command line the way exe.dev's API does before running it (POSIX shell words: single
 * quotes literal, double quotes with backslash escapes of `\ " $ \``, backslash outside quotes,
 * `#` comments at a word start). Unbalanced quotes are an error.
 */
export function shlexSplit(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new ShlexError("unbalanced single quote");
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      i += 1;
      let closed = false;
      while (i < line.length) {
        const d = line[i]!;
        if (d === '"') {
          closed = true;
          i += 1;
          break;
        }
        if (d === "\\" && i + 1 < line.length && '\\"$`\n'.includes(line[i + 1]!)) {
          if (line[i + 1] !== "\n") word += line[i + 1];
          i += 2;
          continue;
        }
        word += d;
        i += 1;
      }
      if (!closed) throw new ShlexError("unbalanced double quote");
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= line.length) throw new ShlexError("trailing backslash");
      if (line[i + 1] !== "\n") word += line[i + 1];
      inWord = true;
      i += 2;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      i += 1;
    } else if (c === "#" && !inWord) {
      const end = line.indexOf("\n", i);
      i = end < 0 ? line.length : end;
    } else {
      word += c;
      inWord = true;
      i += 1;
    }
  }
  if (inWord) words.push(word);
  return words;
}
