// What the emulator serves of exe.dev, per operation: every command of the lobby (what `POST /exec`
// runs; exe.dev has no SDK, its command table is the API) and the SSH session requests (RFC 4254) a
// client can make of a VM. The README's coverage table is generated from this (coverage.test.ts).
import type { CoverageSpec, SdkOperation } from "@paperclip-sandbox/emulator-kit";
import { exeDevCommandNames } from "./commands.js";

const EXEC = "/exec command";
const SSH = "VM SSH";

/** The SSH requests a client can make on a VM's connection (channel types and session requests). */
const SSH_REQUESTS = [
  "session exec",
  "session shell",
  "session pty-req",
  "session window-change",
  "session env",
  "session subsystem",
  "direct-tcpip",
  "tcpip-forward",
  "x11-req",
  "auth-agent-req@openssh.com",
];

/** exe.dev's operations: its lobby commands over `POST /exec`, then the VM's SSH requests. */
export function exeDevOperations(): SdkOperation[] {
  return [...exeDevCommandNames().map((name) => ({ group: EXEC, name, route: `POST /exec "${name} …"` })), ...SSH_REQUESTS.map((name) => ({ group: SSH, name }))];
}

const refused = (reason: string) => ({ status: "refused" as const, reason });
const vmManagement = refused("VM management a provider does not call (501)");

export const EXE_DEV_COVERAGE: CoverageSpec = {
  operations: {
    [`${EXEC}.help`]: { status: "served", reason: "the commands listed are the emulator's; `<cmd> --help` too" },
    [`${EXEC}.ls`]: { status: "served", reason: "by name, tag or glob; `ssh_port` added (every emulated VM has a port of its own)" },
    [`${EXEC}.new`]: { status: "served", reason: "name rules, tags, env, setup script; `--prompt`, `--integration` 422; `--command`, `--registry-auth` ignored" },
    [`${EXEC}.rm`]: { status: "served", reason: "drops the VM's connections and destroys its jail" },
    [`${EXEC}.whoami`]: { status: "served", reason: "the account's email and keys" },
    [`${EXEC}.doc`]: refused("the documentation browser of the interactive lobby (501)"),
    [`${EXEC}.restart`]: vmManagement,
    [`${EXEC}.rename`]: vmManagement,
    [`${EXEC}.tag`]: { status: "served", reason: "adds (or with -d removes) tags; a tag already there, or missing with -d, is 422 as at exe.dev" },
    [`${EXEC}.comment`]: vmManagement,
    [`${EXEC}.stat`]: vmManagement,
    [`${EXEC}.resize`]: vmManagement,
    [`${EXEC}.set-region`]: refused("one region, `emu` (501)"),
    [`${EXEC}.cp`]: {
      status: "served",
      reason:
        "copies the source's disk (its jail's writable trees, frozen for the copy) into a new VM with a host key of its own; `--cpu/--memory/--disk`, `--copy-tags` (default true); the source keeps running; its answer's `ssh` is the destination ls gives, `ssh_port` added as in ls",
    },
    [`${EXEC}.delete-ssh-key`]: refused("account keys are the emulator's options (501)"),
    [`${EXEC}.ssh-key`]: refused("account keys are the emulator's options (501)"),
    [`${EXEC}.browser`]: refused("web login links (501)"),
    [`${EXEC}.ssh`]: refused("commands in a VM run over the VM's own SSH, not through /exec (501)"),
    [`${EXEC}.exe0-to-exe1`]: refused("the emulator issues no exe1 tokens (501)"),
    [`${EXEC}.true`]: refused("a lobby shell builtin (501)"),
    [`${EXEC}.exit`]: refused("a lobby shell builtin (501)"),
    [`${EXEC}.share`]: refused("the HTTPS proxy and its sharing are not modelled (501)"),
    [`${EXEC}.team`]: refused("teams (501)"),
    [`${EXEC}.integrations`]: refused("integrations (501)"),
    [`${EXEC}.defaults`]: refused("account defaults (501)"),
    [`${EXEC}.domain`]: refused("custom domains (501)"),
    [`${EXEC}.shelley`]: refused("the Shelley agent (501)"),
    [`${EXEC}.billing`]: refused("billing (501)"),
    [`${SSH}.session exec`]: { status: "served", reason: "`sh -c` in the VM's jail from the sandbox user's home; stdin, stdout, stderr, exit-status; keeps running when its client goes" },
    [`${SSH}.session shell`]: refused("no interactive shells: ends with 1 and a message"),
    [`${SSH}.session pty-req`]: {
      status: "served",
      reason: "the command leads a session on a real terminal in the jail (the asked size, TERM); bytes unchanged; hung up (SIGHUP, then SIGKILL) when its client goes",
    },
    [`${SSH}.session window-change`]: { status: "served", reason: "resizes the jail's terminal (the program gets SIGWINCH)" },
    [`${SSH}.session env`]: refused("ignored, as OpenSSH does without `AcceptEnv`: env travels in the command"),
    [`${SSH}.session subsystem`]: refused("no sftp subsystem (legacy `scp -O` works where the jail has scp)"),
    [`${SSH}.direct-tcpip`]: refused("`DisableForwarding yes`"),
    [`${SSH}.tcpip-forward`]: refused("`DisableForwarding yes`"),
    [`${SSH}.x11-req`]: refused("`DisableForwarding yes`"),
    [`${SSH}.auth-agent-req@openssh.com`]: refused("`DisableForwarding yes`"),
  },
};
