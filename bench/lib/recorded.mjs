// Time plus vendor calls, read from an emulator's recorder (`emu.requests`), per operation.
import { summarize } from "./stats.mjs";

/** Milliseconds since `start` (a `process.hrtime.bigint()`). */
const msSince = (start) => Number(process.hrtime.bigint() - start) / 1e6;

/** Runs `work` once: its value, its time, and the calls it made (last path segment), once the recorder is idle. */
export async function measured(emu, work) {
  await emu.requests.idle();
  const mark = emu.requests.mark();
  const started = process.hrtime.bigint();
  const value = await work();
  const elapsed = msSince(started);
  await emu.requests.idle();
  const calls = emu.requests.list({ since: mark }).map((call) => call.path.split("/").pop());
  return { value, ms: elapsed, calls };
}

/** Runs `op(i)` `n` times back to back: the time per op (summarized) and vendor calls per op. */
export async function measureRepeated(emu, n, op) {
  const samples = [];
  await emu.requests.idle();
  const mark = emu.requests.mark();
  for (let i = 0; i < n; i += 1) {
    const started = process.hrtime.bigint();
    await op(i);
    samples.push(msSince(started));
  }
  await emu.requests.idle();
  return { ...summarize(samples), callsPerOp: emu.requests.list({ since: mark }).length / n };
}
