/** Modal's enums as the wire carries them (int32) and small message helpers. */
export const STATUS = { UNSPECIFIED: 0, SUCCESS: 1, FAILURE: 2, TERMINATED: 3, TIMEOUT: 4, INIT_FAILURE: 5, INTERNAL_FAILURE: 6, IDLE_TIMEOUT: 7 } as const;
export const OBJECT_CREATION = { UNSPECIFIED: 0, CREATE_IF_MISSING: 1, EPHEMERAL: 5 } as const;
export const NETWORK_ACCESS = { UNSPECIFIED: 0, OPEN: 1, BLOCKED: 2, ALLOWLIST: 3 } as const;
export const STDIO_FD = { STDOUT: 0, STDERR: 1 } as const;
export const STDERR_CONFIG_STDOUT = 2;

export interface GenericResult {
  status: number;
  exception: string;
  exitcode: number;
  traceback: string;
}

export function result(status: number, exitcode = 0, exception = ""): GenericResult {
  return { status, exception, exitcode, traceback: "" };
}

export interface WireTag {
  tag_name: string;
  tag_value: string;
}

export function tagsToWire(tags: ReadonlyMap<string, string>): WireTag[] {
  return [...tags].map(([tag_name, tag_value]) => ({ tag_name, tag_value }));
}

/** Epoch seconds (Modal's timestamps are doubles in seconds). */
export function seconds(ms: number): number {
  return ms / 1000;
}
