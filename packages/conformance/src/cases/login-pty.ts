import { randomUUID } from "node:crypto";
import type { LoginPtyHandle } from "@paperclip-sandbox/worker-client";
import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectOk, shellQuote } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const LOGIN_PTY_METHODS = ["loginPtyOpen", "loginPtyInput", "loginPtyStop", "loginPtyClose"];
const MODE_FILE = ".paperclip-conformance-login-mode";

/**
 * A stand-in `codex` for the host's device login (`codex login --device-auth`, run with CODEX_HOME
 * set to the session home), installed in the lease's `$HOME/.local/bin`. What it does is chosen by a
 * mode file beside it, so one install serves every case.
 */
const FAKE_CODEX = `#!/bin/sh
mode=$(cat "$(dirname "$0")/${MODE_FILE}" 2>/dev/null || echo login)
echo "$$" > "\${CODEX_HOME:?}/pid"
case "$mode" in
login)
  printf 'Fake device login (%s)\\n' "$*"
  if [ -t 0 ] && [ -t 1 ]; then printf 'terminal=yes\\n'; else printf 'terminal=no\\n'; fi
  printf 'Enter code: '
  IFS= read -r code
  printf 'got[%s]\\n' "$code"
  (umask 077; printf '{"tokens":{"account_id":"conformance","refresh_token":"%s"}}' "$code" > "$CODEX_HOME/auth.json")
  exit 0;;
bytes*)
  count=\${mode#bytes }
  stty raw -echo -iexten
  printf 'ready\\n'
  head -c "$count" | od -An -tx1 | tr -d ' \\n'
  printf '\\nend\\n'
  printf '%s' "$(cat "$(dirname "$0")/.paperclip-conformance-output")"
  exit 0;;
exit) printf 'bye\\n'; exit 3;;
wait) printf 'waiting\\n'; exec sleep 300;;
esac
`;

/** What the host's route saw of one terminal. */
class Route {
  text = "";
  exit: { exitCode: number | null } | null = null;
  outputAfterExit = false;
  readonly listener = {
    onOutput: (chunk: string) => {
      if (this.exit) this.outputAfterExit = true;
      this.text += chunk;
    },
    onExit: (exit: { exitCode: number | null }) => {
      this.exit = exit;
    },
  };

  async until(cond: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline)
        throw new assert.AssertionError({ message: `login terminal: timed out waiting for ${what} (output so far ${JSON.stringify(this.text.slice(-500))}, exit ${JSON.stringify(this.exit)})` });
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

interface OpenedLogin {
  route: Route;
  handle: LoginPtyHandle;
  sessionHome: string;
}

function requireLoginPty(world: ConformanceWorld): void {
  if (world.driver?.supportsLoginPty !== true) {
    throw new ConformanceSkip(`${world.options.driverKey} has no login terminal (supportsLoginPty is not declared: its transport opens no pseudo-terminal; the host refuses its logins up front)`);
  }
  requireMethods(world, ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"]);
  // Declared but not served: the host would offer a login the worker cannot run.
  const missing = LOGIN_PTY_METHODS.filter((method) => !world.client.supportedMethods.includes(method));
  assert.ok(missing.length === 0, `${world.options.driverKey} declares supportsLoginPty but its worker does not advertise ${missing.join(", ")}`);
}

async function installFakeCodex(world: ConformanceWorld, lease: AcquiredLease, mode: string, output?: string): Promise<void> {
  const dir = `"$HOME/.local/bin"`;
  const script = [
    `mkdir -p ${dir}`,
    `cat > ${dir}/codex <<'PAPERCLIP_FAKE_CODEX'\n${FAKE_CODEX}PAPERCLIP_FAKE_CODEX`,
    `chmod 0755 ${dir}/codex`,
    `printf '%s' ${shellQuote(mode)} > ${dir}/${MODE_FILE}`,
    output === undefined ? "" : `printf '%s' ${shellQuote(output)} > ${dir}/.paperclip-conformance-output`,
  ].join("\n");
  expectOk(await world.sh(lease, script), "install the stand-in codex in $HOME/.local/bin");
}

async function openLogin(world: ConformanceWorld, lease: AcquiredLease, extra: { sessionHome?: string } = {}): Promise<OpenedLogin> {
  const route = new Route();
  const sessionHome = extra.sessionHome ?? `/tmp/paperclip-adapter-login/${randomUUID()}`;
  const hostRouteId = `route-${randomUUID()}`;
  const handle = await world.client.login.open(
    {
      hostRouteId,
      driverKey: world.options.driverKey,
      companyId: world.identity.companyId,
      environmentId: world.identity.environmentId,
      providerLeaseId: lease.providerLeaseId,
      loginCommandKey: "codex",
      sessionHome,
    },
    route.listener,
  );
  assert.ok(typeof handle.workerSessionId === "string" && handle.workerSessionId.length > 0, "the open reply must carry a workerSessionId");
  return { route, handle, sessionHome };
}

async function pidOf(world: ConformanceWorld, lease: AcquiredLease, sessionHome: string): Promise<string> {
  const read = await world.sh(lease, `cat ${shellQuote(`${sessionHome}/pid`)}`);
  expectOk(read, "read the terminal program's pid");
  const pid = read.stdout.trim();
  assert.match(pid, /^\d+$/, `pid file content: ${JSON.stringify(read.stdout)}`);
  return pid;
}

async function assertGone(world: ConformanceWorld, lease: AcquiredLease, pid: string, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = await world.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`);
    if (probe.stdout.trim() === "gone") return;
    if (Date.now() > deadline) assert.fail(`${what}: the terminal's program (pid ${pid}) is still running`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export const loginPtyCases: ConformanceCase[] = [
  {
    // The host's device login, as it runs it: the key's command on a real terminal in the session
    // home, the prompt streamed back, the operator's input echoed by the terminal, a credential file
    // written under the session home (0600, the sandbox user's), the exit after the last output.
    name: "login-pty-session",
    run: (world) => {
      requireLoginPty(world);
      return world.withLease(async (lease) => {
        await installFakeCodex(world, lease, "login");
        const { route, handle, sessionHome } = await openLogin(world, lease);
        await route.until(() => route.text.includes("Enter code: "), "the prompt");
        assert.match(route.text, /Fake device login \(login --device-auth\)/, "the key's fixed command and arguments");
        assert.match(route.text, /terminal=yes/, "the program must see a terminal on stdin and stdout");
        const home = await world.sh(lease, `stat -c '%a %u' ${shellQuote(sessionHome)}; id -u`);
        expectOk(home, "stat the session home");
        const [modeOwner, uid] = home.stdout.trim().split("\n");
        assert.equal(modeOwner, `700 ${uid}`, "the session home must be a 0700 directory of the sandbox user");

        await handle.input("conformance-code-42");
        await handle.input("\r");
        await route.until(() => route.exit !== null, "the exit after the code");
        assert.equal(route.exit!.exitCode, 0, `the login program's exit code (output ${JSON.stringify(route.text)})`);
        assert.equal(route.outputAfterExit, false, "output arrived after the exit notification");
        const echoed = route.text.indexOf("conformance-code-42");
        const got = route.text.indexOf("got[conformance-code-42]");
        assert.ok(echoed >= 0 && echoed < got, `the terminal must echo the input before the program answers: ${JSON.stringify(route.text)}`);

        const auth = await world.sh(lease, `f=${shellQuote(`${sessionHome}/auth.json`)}; [ -f "$f" ] && [ ! -L "$f" ] && stat -c '%a %u' "$f" && cat "$f"`);
        expectOk(auth, "read the credential file back under the session home");
        const [fileModeOwner, body] = auth.stdout.split("\n");
        assert.equal(fileModeOwner, `600 ${uid}`, "auth.json must be 0600 and the sandbox user's");
        assert.equal(body, `{"tokens":{"account_id":"conformance","refresh_token":"conformance-code-42"}}`);
        await assertGone(world, lease, await pidOf(world, lease, sessionHome), "after its own exit");
        assert.deepEqual(await handle.close(), { hostRouteId: handle.hostRouteId }, "close must echo the host route id");
        await assert.rejects(handle.input("late"), "input to a closed terminal must be refused");
      });
    },
  },
  {
    // Bytes both ways: in raw mode the program reads exactly what was typed (every ASCII control
    // byte, multi-byte characters), and what it prints arrives unchanged as text.
    name: "login-pty-bytes",
    run: (world) => {
      requireLoginPty(world);
      return world.withLease(async (lease) => {
        const typed = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join("") + "héllo ✓ 日本 😀";
        const typedBytes = Buffer.from(typed, "utf8");
        const printed = "out: é ✓ 日本 😀 " + Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("");
        await installFakeCodex(world, lease, `bytes ${typedBytes.length}`, printed);
        const { route, handle } = await openLogin(world, lease);
        await route.until(() => route.text.includes("ready\n"), "raw mode");
        // In pieces, as keystrokes arrive; a character is never split (the host sends strings).
        const characters = Array.from(typed);
        for (let i = 0; i < characters.length; i += 16) await handle.input(characters.slice(i, i + 16).join(""));
        await route.until(() => route.exit !== null, "the exit after the bytes");
        const hex = /ready\n([0-9a-f]*)\nend\n/.exec(route.text)?.[1];
        assert.equal(hex, typedBytes.toString("hex"), "the program must read exactly the bytes typed");
        assert.ok(route.text.endsWith(`end\n${printed}`), `the printed text must arrive unchanged: ${JSON.stringify(route.text.slice(-300))}`);
        assert.equal(route.exit!.exitCode, 0);
        await handle.close();
      });
    },
  },
  {
    // A program that exits on its own reports its code; ^C interrupts the foreground program as
    // in a terminal; stop ends a program that ignores its input; close and release end what is
    // left; nothing of a terminal outlives it.
    name: "login-pty-exit-and-signals",
    run: (world) => {
      requireLoginPty(world);
      return world.withLease(async (lease) => {
        await installFakeCodex(world, lease, "exit");
        const exiting = await openLogin(world, lease);
        await exiting.route.until(() => exiting.route.exit !== null, "the program's own exit");
        assert.equal(exiting.route.exit!.exitCode, 3, "the exit code of a program that exits on its own");
        assert.match(exiting.route.text, /bye/, "its output before the exit");
        await exiting.handle.close();

        await installFakeCodex(world, lease, "wait");
        const interrupted = await openLogin(world, lease);
        await interrupted.route.until(() => interrupted.route.text.includes("waiting"), "the waiting program");
        const interruptedPid = await pidOf(world, lease, interrupted.sessionHome);
        await interrupted.handle.input("\x03");
        await interrupted.route.until(() => interrupted.route.exit !== null, "the exit after ^C");
        assert.notEqual(interrupted.route.exit!.exitCode, 0, "^C must end the program with a failure status");
        await assertGone(world, lease, interruptedPid, "after ^C");
        await interrupted.handle.close();

        const stopped = await openLogin(world, lease);
        await stopped.route.until(() => stopped.route.text.includes("waiting"), "the waiting program");
        const stoppedPid = await pidOf(world, lease, stopped.sessionHome);
        await stopped.handle.stop();
        await stopped.route.until(() => stopped.route.exit !== null, "the exit after stop");
        await assertGone(world, lease, stoppedPid, "after stop");
        await stopped.handle.close();

        const closed = await openLogin(world, lease);
        await closed.route.until(() => closed.route.text.includes("waiting"), "the waiting program");
        const closedPid = await pidOf(world, lease, closed.sessionHome);
        assert.deepEqual(await closed.handle.close(), { hostRouteId: closed.handle.hostRouteId });
        await assertGone(world, lease, closedPid, "after close");

        // Still open at a plain release: the release ends it and does not hang on it.
        const open = await openLogin(world, lease);
        await open.route.until(() => open.route.text.includes("waiting"), "the waiting program");
        const released = world.release(lease).then(() => "released");
        const outcome = await Promise.race([released, new Promise((resolve) => setTimeout(() => resolve("hung"), 20_000))]);
        assert.equal(outcome, "released", "release waited on the open login terminal");
        await open.route.until(() => open.route.exit !== null, "the exit when the lease was released");
        await open.handle.close();
      });
    },
  },
  {
    // The session home is made new and checked in the sandbox: a link planted at the root, a home
    // that already exists, or a root others may write are refused, and nothing is written through them.
    name: "login-pty-session-home-checks",
    run: (world) => {
      requireLoginPty(world);
      return world.withLease(async (lease) => {
        await installFakeCodex(world, lease, "login");
        const root = "/tmp/paperclip-adapter-login";
        const planted = `${lease.remoteCwd}/planted-${randomUUID().slice(0, 8)}`;
        expectOk(await world.sh(lease, `mkdir ${shellQuote(planted)} && ln -s ${shellQuote(planted)} ${root}`), "plant a link at the root");
        await assert.rejects(openLogin(world, lease), /LOGIN_PTY_HOME_REJECTED/, "a link at the session-home root must be refused");
        const through = await world.sh(lease, `ls -A ${shellQuote(planted)}`);
        assert.equal(through.stdout.trim(), "", "nothing may be created through the planted link");

        expectOk(await world.sh(lease, `rm ${root} && mkdir -m 0777 ${root} && chmod 0777 ${root}`), "a root writable by everyone");
        await assert.rejects(openLogin(world, lease), /LOGIN_PTY_HOME_REJECTED/, "a root others may write must be refused");

        const existing = `${root}/${randomUUID()}`;
        expectOk(await world.sh(lease, `chmod 0700 ${root} && mkdir -m 0700 ${shellQuote(existing)}`), "a session home made before the open");
        await assert.rejects(openLogin(world, lease, { sessionHome: existing }), /LOGIN_PTY_HOME_REJECTED/, "an existing session home must be refused");

        await assert.rejects(openLogin(world, lease, { sessionHome: `${root}/../../workspace` }), /sessionHome/, "a home outside the exact shape must be refused");
        // With the root sound again, a login opens.
        const ok = await openLogin(world, lease);
        await ok.route.until(() => ok.route.text.includes("Enter code: "), "the prompt");
        await ok.handle.close();
      });
    },
  },
];
