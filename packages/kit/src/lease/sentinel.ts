/** Written inside a reusable sandbox; a resume checks it to be sure it reached the sandbox it created. */
export const REUSE_SENTINEL_PATH = ".paperclip-runtime/reusable-sandbox-lease.json";

export function buildSentinel(input: { fingerprint: string; providerLeaseId: string }): string {
  return `${JSON.stringify({ version: 1, fingerprint: input.fingerprint, providerLeaseId: input.providerLeaseId })}\n`;
}

export function sentinelNamesFingerprint(text: string | null | undefined, fingerprint: string): boolean {
  if (!text) return false;
  try {
    const parsed = JSON.parse(text) as { fingerprint?: unknown };
    return typeof parsed === "object" && parsed !== null && parsed.fingerprint === fingerprint;
  } catch {
    return false;
  }
}
