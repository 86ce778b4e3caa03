import { formatBytes, formatMs } from "./phase-timer.js";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface ProgressOutput {
  isTTY?: boolean;
  write(text: string): unknown;
}

/**
 * A one-line progress indicator for a sync on a TTY (spinner, what is moving, elapsed time),
 * replaced by a summary line when done. Prints nothing when the output is not a TTY.
 * The sync hooks report no intermediate progress, so this shows activity, not a percentage.
 */
export async function withSyncProgress<T extends { files: number; bytes: number }>(out: ProgressOutput, label: string, known: { files?: number; bytes?: number }, work: () => Promise<T>): Promise<T> {
  if (!out.isTTY) return work();
  const start = performance.now();
  const size = known.files !== undefined ? ` ${known.files} files, ${formatBytes(known.bytes ?? 0)}` : "";
  let frame = 0;
  const draw = () => out.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${label}${size} … ${formatMs(performance.now() - start)}`);
  draw();
  const timer = setInterval(draw, 100);
  try {
    const result = await work();
    const elapsed = performance.now() - start;
    const rate = elapsed > 0 ? ` (${formatBytes((result.bytes / elapsed) * 1000)}/s)` : "";
    out.write(`\r\x1b[2K✓ ${label}: ${result.files} files, ${formatBytes(result.bytes)} in ${formatMs(elapsed)}${rate}\n`);
    return result;
  } catch (error) {
    out.write(`\r\x1b[2K✗ ${label} failed after ${formatMs(performance.now() - start)}\n`);
    throw error;
  } finally {
    clearInterval(timer);
  }
}
