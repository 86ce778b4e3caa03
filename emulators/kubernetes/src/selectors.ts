import { badRequest } from "./status.js";

type Requirement = (labels: Record<string, string>) => boolean;

/** Parses a label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`); throws 400 on bad syntax. */
export function parseLabelSelector(text: string | null | undefined): (labels: Record<string, string> | undefined) => boolean {
  if (!text || !text.trim()) return () => true;
  const requirements: Requirement[] = [];
  for (const part of splitTopLevel(text)) {
    const term = part.trim();
    let m: RegExpMatchArray | null;
    if ((m = term.match(/^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$/))) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      requirements.push(op === "!=" ? (l) => l[key] !== value : (l) => l[key] === value);
    } else if ((m = term.match(/^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$/))) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = new Set(
        list
          .split(",")
          .map((v) => v.trim())
          .filter(Boolean),
      );
      requirements.push(op === "in" ? (l) => key in l && values.has(l[key]!) : (l) => !(key in l) || !values.has(l[key]!));
    } else if ((m = term.match(/^!\s*([^\s!=(),]+)$/))) {
      const key = m[1]!;
      requirements.push((l) => !(key in l));
    } else if ((m = term.match(/^([^\s!=(),]+)$/))) {
      const key = m[1]!;
      requirements.push((l) => key in l);
    } else {
      throw badRequest(`unable to parse requirement: found '${term}', expected: in, notin, =, ==, !=, gt, lt`);
    }
  }
  return (labels) => requirements.every((r) => r(labels ?? {}));
}

/** Field selectors on metadata.name and metadata.namespace (what clients use for single-object watches). */
export function parseFieldSelector(text: string | null | undefined): (obj: { metadata?: { name?: string; namespace?: string } }) => boolean {
  if (!text || !text.trim()) return () => true;
  const checks: Array<(obj: { metadata?: { name?: string; namespace?: string } }) => boolean> = [];
  for (const term of text.split(",")) {
    const m = term.trim().match(/^([a-zA-Z.]+)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const [, field, op, value] = m as unknown as [string, string, string, string];
    const get =
      field === "metadata.name"
        ? (o: any) => o.metadata?.name
        : field === "metadata.namespace"
          ? (o: any) => o.metadata?.namespace
          : field === "status.phase"
            ? (o: any) => o.status?.phase
            : undefined;
    if (!get) throw badRequest(`"${field}" is not a known field selector: only "metadata.name", "metadata.namespace", "status.phase"`);
    checks.push(op === "!=" ? (o) => get(o) !== value : (o) => get(o) === value);
  }
  return (obj) => checks.every((c) => c(obj));
}

function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else current += ch;
  }
  parts.push(current);
  return parts.filter((p) => p.trim());
}
