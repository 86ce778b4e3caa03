/** Writes that never throw on a closed pipe (EPIPE): the CLI keeps cleaning up even if output is gone. */
function safeWriter(stream: NodeJS.WriteStream) {
  stream.on("error", () => undefined);
  return (text: string) => {
    if (!stream.destroyed && stream.writable) stream.write(text);
  };
}

export const out = safeWriter(process.stdout);
export const err = safeWriter(process.stderr);

/** Resolves once stdout and stderr have flushed (before `process.exit`). */
export function flushOutput(): Promise<void> {
  const flush = (stream: NodeJS.WriteStream) =>
    new Promise<void>((resolve) => {
      if (stream.destroyed || !stream.writable) return resolve();
      stream.write("", () => resolve());
    });
  return Promise.all([flush(process.stdout), flush(process.stderr)]).then(() => undefined);
}
