// Keystroke -> echo timing on a terminal, shared by the login and setup terminal benches.

const ALPHABET = "abcdefghijklmnopqrstuvwxyz";

/** Terminal output as it arrives, with a wait for a character to show up after a given offset. */
export class Screen {
  text = "";
  waiter = null;
  push(chunk) {
    this.text += chunk;
    if (this.waiter && this.text.slice(this.waiter.from).includes(this.waiter.ch)) {
      const { resolve } = this.waiter;
      this.waiter = null;
      resolve(process.hrtime.bigint());
    }
  }
  next(ch) {
    const from = this.text.length;
    return new Promise((resolve) => (this.waiter = { ch, from, resolve }));
  }
  async until(marker) {
    while (!this.text.includes(marker)) await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Sends one character at a time and times until its echo arrives (the arrival's own timestamp), in ms. */
export async function typeAndTime(send, screen, count) {
  const samples = [];
  for (let i = 0; i < count; i += 1) {
    const ch = ALPHABET[i % ALPHABET.length];
    const echoed = screen.next(ch);
    const start = process.hrtime.bigint();
    await send(ch);
    samples.push(Number((await echoed) - start) / 1e6);
  }
  return samples;
}
