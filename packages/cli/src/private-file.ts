import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import path from "node:path";

/**
 * Writes `text` to `file` with mode 0600 and no window with wider permissions: the bytes go to a
 * new file created exclusively with mode 0600 (then fchmod'ed, in case of a umask) in the same
 * directory, which is renamed over the target. An existing file's wider mode never carries over.
 */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  const scratch = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(scratch, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    await handle.chmod(0o600);
    await handle.writeFile(text);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(scratch).catch(() => undefined);
    throw error;
  }
  await handle.close();
  try {
    await rename(scratch, file);
  } catch (error) {
    await unlink(scratch).catch(() => undefined);
    throw error;
  }
}
