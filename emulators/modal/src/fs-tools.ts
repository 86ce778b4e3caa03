import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import type { FileInfo, OutputStreamName, SandboxFiles } from "@paperclip-sandbox/sandbox-backend";
import { OutputBuffer, StdinCursor, type EmulatedProcess, type ExitStatus } from "./process.js";

/** The in-image tool `sb.filesystem.*` runs as an exec; the emulator plays it (see modal.md §5 Files). */
export const FS_TOOLS_PATH = "/__modal/.bin/modal-sandbox-fs-tools";
/** Largest file one WriteFile takes (held in memory until stdin ends). */
const FS_TOOLS_MAX_WRITE_BYTES = 64 * 1024 * 1024;

type FsCommand =
  | { WriteFile: { path: string } }
  | { ReadFile: { path: string } }
  | { ListFiles: { path: string } }
  | { Stat: { path: string } }
  | { MakeDirectory: { path: string; parents?: boolean } }
  | { Remove: { path: string; recursive?: boolean } };

/** The fs-tools' error kinds the SDK maps to its typed errors. */
type ErrorKind = "NotFound" | "IsDirectory" | "NotDirectory" | "PermissionDenied" | "PathAlreadyExists" | "DirectoryNotEmpty" | "FileTooLarge" | "NotSupported" | "Other";

class FsToolError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
  }
}

function kindOf(code: string): ErrorKind {
  switch (code) {
    case "ENOENT":
      return "NotFound";
    case "EISDIR":
      return "IsDirectory";
    case "ENOTDIR":
      return "NotDirectory";
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return "PermissionDenied";
    case "EEXIST":
      return "PathAlreadyExists";
    case "ENOTEMPTY":
      return "DirectoryNotEmpty";
    case "E2BIG":
    case "EFBIG":
      return "FileTooLarge";
    default:
      return "Other";
  }
}

const MESSAGES: Record<ErrorKind, string> = {
  NotFound: "No such file or directory",
  IsDirectory: "Is a directory",
  NotDirectory: "Not a directory",
  PermissionDenied: "Permission denied",
  PathAlreadyExists: "Path already exists",
  DirectoryNotEmpty: "Directory not empty",
  FileTooLarge: "File too large",
  NotSupported: "Operation not supported",
  Other: "Operation failed",
};

const TYPE_BITS: Record<FileInfo["type"], number> = { file: 0o100000, directory: 0o040000, symlink: 0o120000, other: 0 };

function permissionsString(info: FileInfo): string {
  const kind = info.type === "directory" ? "d" : info.type === "symlink" ? "l" : "-";
  const bits = ["r", "w", "x"];
  let text = kind;
  for (let i = 8; i >= 0; i -= 1) text += info.mode & (1 << i) ? bits[(8 - i) % 3] : "-";
  return text;
}

/** The tool's entry JSON (snake_case, as the SDK parses it). */
function entryJson(info: FileInfo) {
  return {
    name: info.name,
    path: info.path,
    type: info.type === "other" ? "file" : info.type,
    size: info.size,
    mode: TYPE_BITS[info.type] | info.mode,
    permissions: permissionsString(info),
    owner: info.owner,
    group: info.group,
    modified_time: Math.floor(info.mtimeMs / 1000),
    symlink_target: info.symlinkTarget ?? null,
  };
}

function parseCommand(argv: readonly string[]): FsCommand {
  if (argv.length !== 2) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `${FS_TOOLS_PATH} takes one JSON command`);
  let command: unknown;
  try {
    command = JSON.parse(argv[1]!);
  } catch {
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `${FS_TOOLS_PATH}: the command is not JSON`);
  }
  if (typeof command !== "object" || command === null || Object.keys(command).length !== 1) {
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `${FS_TOOLS_PATH}: expected one {Operation: {...}} object`);
  }
  const [op, body] = Object.entries(command)[0]!;
  const path = (body as { path?: unknown } | null)?.path;
  if (typeof path !== "string" || !path.startsWith("/")) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `${FS_TOOLS_PATH}: ${op} needs an absolute path`);
  return command as FsCommand;
}

/**
 * One fs-tools exec: the operation runs through the backend's in-jail file ops (as the sandbox
 * user), its result is the process's stdout and exit code, and a failure is exit 1 with the tool's
 * JSON error on stderr. WriteFile takes the file's bytes on stdin and writes them at EOF.
 */
export class FsToolProcess implements EmulatedProcess {
  readonly exit: Promise<ExitStatus>;
  private status: ExitStatus | null = null;
  private readonly stdout = new OutputBuffer();
  private readonly stderr = new OutputBuffer();
  private readonly stdin: StdinCursor;
  private readonly input: Buffer[] = [];
  private inputBytes = 0;
  private finish!: (status: ExitStatus) => void;

  constructor(
    readonly execId: string,
    argv: readonly string[],
    files: SandboxFiles,
  ) {
    const command = parseCommand(argv);
    this.exit = new Promise<ExitStatus>((resolve) => (this.finish = resolve)).then((status) => {
      this.status = status;
      this.stdout.end();
      this.stderr.end();
      return status;
    });
    let stdinDone: () => void = () => undefined;
    const stdinClosed = new Promise<void>((resolve) => (stdinDone = resolve));
    this.stdin = new StdinCursor(
      async (data) => {
        this.inputBytes += data.length;
        if (this.inputBytes <= FS_TOOLS_MAX_WRITE_BYTES) this.input.push(data);
      },
      async () => stdinDone(),
    );
    void this.run(command, files, stdinClosed);
  }

  private async run(command: FsCommand, files: SandboxFiles, stdinClosed: Promise<void>): Promise<void> {
    try {
      if ("WriteFile" in command) {
        await stdinClosed;
        if (this.inputBytes > FS_TOOLS_MAX_WRITE_BYTES) throw new FsToolError("FileTooLarge", `the emulator's fs-tools write at most ${FS_TOOLS_MAX_WRITE_BYTES} bytes`);
        await files.write(command.WriteFile.path, Buffer.concat(this.input, this.inputBytes), { createParents: true });
      } else if ("ReadFile" in command) {
        const info = await files.stat(command.ReadFile.path, { follow: true });
        if (info.type === "directory") throw new FsToolError("IsDirectory", MESSAGES.IsDirectory);
        this.stdout.push(await files.read(command.ReadFile.path));
      } else if ("ListFiles" in command) {
        const info = await files.stat(command.ListFiles.path, { follow: true });
        if (info.type !== "directory") throw new FsToolError("NotDirectory", MESSAGES.NotDirectory);
        const entries = (await files.list(command.ListFiles.path, { depth: 1 })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        this.stdout.push(JSON.stringify(entries.map(entryJson)));
      } else if ("Stat" in command) {
        this.stdout.push(JSON.stringify(entryJson(await files.stat(command.Stat.path))));
      } else if ("MakeDirectory" in command) {
        const parents = command.MakeDirectory.parents !== false;
        const made = await files.mkdir(command.MakeDirectory.path, { parents });
        if (!made.created && !parents) throw new FsToolError("PathAlreadyExists", MESSAGES.PathAlreadyExists);
      } else if ("Remove" in command) {
        await files.remove(command.Remove.path, { recursive: command.Remove.recursive === true });
      } else {
        throw new FsToolError("NotSupported", `${Object.keys(command)[0]} is not supported by the emulator`);
      }
      this.finish({ code: 0 });
    } catch (error) {
      const kind = error instanceof FsToolError ? error.kind : kindOf(String((error as { code?: unknown }).code ?? ""));
      const message = error instanceof FsToolError ? error.message : MESSAGES[kind];
      this.stderr.push(JSON.stringify({ error_kind: kind, message, detail: (error as Error).message ?? "" }));
      this.finish({ code: 1 });
    }
  }

  writeStdin(offset: number, data: Buffer, eof: boolean): Promise<void> {
    return this.stdin.write(offset, data, eof);
  }

  stdinStatus() {
    return { written: this.stdin.written, closed: this.stdin.closed };
  }

  read(stream: OutputStreamName, offset: number, send: (data: Buffer) => void, signal: AbortSignal): Promise<void> {
    return (stream === "stdout" ? this.stdout : this.stderr).read(offset, send, signal);
  }

  exited(): ExitStatus | null {
    return this.status;
  }

  kill(): void {
    this.finish({ signal: 9 });
  }
}
