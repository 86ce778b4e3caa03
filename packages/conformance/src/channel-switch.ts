import { afterAll, beforeAll } from "vitest";

/** The kit's switch (`COMMAND_CHANNEL_SWITCH`): `always` makes every command wait for the lease's channel. */
export const COMMAND_CHANNEL_SWITCH_VARIABLE = "PAPERCLIP_SANDBOX_COMMAND_CHANNEL";

export interface CommandChannelSwitch {
  /** Sets the switch for what follows (e.g. `off`: every command a vendor exec of its own). */
  set(value: string): void;
  /** Back to the file's value. */
  reset(): void;
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
    set: (next) => void (process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = next),
    reset: () => void (process.env[COMMAND_CHANNEL_SWITCH_VARIABLE] = value),
  };
}
