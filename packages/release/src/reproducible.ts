/** Differences between two `SHA256SUMS` texts, one line each (empty: identical). */
export function compareChecksumLists(a: string, b: string): string[] {
  const parse = (text: string) =>
    new Map(
      text
        .split("\n")
        .filter(Boolean)
        .map((line) => {
          const [sum, file] = line.split(/\s+/, 2);
          return [file ?? "", sum ?? ""] as const;
        }),
    );
  const left = parse(a);
  const right = parse(b);
  const problems: string[] = [];
  for (const file of [...new Set([...left.keys(), ...right.keys()])].sort()) {
    const x = left.get(file);
    const y = right.get(file);
    if (x === undefined) problems.push(`${file}: only in the second pack`);
    else if (y === undefined) problems.push(`${file}: only in the first pack`);
    else if (x !== y) problems.push(`${file}: ${x} then ${y}`);
  }
  return problems;
}
