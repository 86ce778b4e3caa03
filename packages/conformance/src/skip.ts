/** Thrown by a case that cannot apply to this provider; runners report it as skipped with the reason. */
export class ConformanceSkip extends Error {
  override readonly name = "ConformanceSkip";
  constructor(readonly reason: string) {
    super(`skipped: ${reason}`);
  }
}
