import { afterAll, beforeAll } from "vitest";

/** The kit's switch (`COMMAND_CHANNEL_SWITCH`): `always` makes every command wait for the lease's channel. */
export const COMMAND_CHANNEL_SWITCH_VARIABLE = "PAPERCLIP_SANDBOX_COMMAND_CHANNEL";

export interface CommandChannelSwitch {
  /**
   * Runs `fn` with the switch at `value` (e.g. `off`: every command a vendor exec of its own), then
   * puts the file's value back, also when `fn` throws.
   */
  during<T>(value: string, fn: () => Promise<T>): Promise<T>;
}

/**
 * For a test file about a provider's command channel, in process: every command waits for the
 * lease's channel (`always`), so each test knows which path a command takes; a test may switch it
 * for a while. The variable is put back as it was after the file.
 */
export function useCommandChannelSwitch(value = "always"): CommandChannelSwitch {
  const before = process.env[COMMAND_CHANNEL_SWITCH_VARIABLE];
  beforeAll(() => {
    process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = value;
  });
  afterAll(() => {
    if (before === undefined) delete process.env[COMMAND_CHANNEL_SWITCH_VARIABLE];
    else process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = before;
  });
  return {
    async during(next, fn) {
      process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = next;
      try {
        return await fn();
      } finally {
        process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = value;
      }
    },
  };
}
