import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectExit, expectOk, shellQuote } from "../expect.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const EXEC_METHODS = ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"];

/** Arguments that break naive quoting; each must come back byte-exact. */
export const HOSTILE_ARGUMENTS = [
  "two words",
  "it's",
  'say "hi"',
  "line one\nline two",
  "$HOME",
  "${PATH}",
  "`id`",
  "$(echo injected)",
  "back\\slash",
  "*",
  "; echo nope",
  "ünïcødé ✓ 日本語 🚀",
  "",
  "  leading and trailing  ",
  "-n",
];

/** True when pid is a live (non-zombie) process; reads /proc when present, else kill -0. */
const ALIVE_FN = `alive() { if [ -r "/proc/$1/stat" ]; then read -r _ _ s _ < "/proc/$1/stat" 2>/dev/null || return 1; [ "$s" != Z ]; ` + `else kill -0 "$1" 2>/dev/null; fi; }`;

/** Lists live members of process group $1 (by /proc when present, else `kill -0 -- -pgid`). */
const GROUP_MEMBERS_FN =
  `group_members() { if [ -d /proc/self ]; then for f in /proc/[0-9]*/stat; do ` +
  `read -r p _ s _ g _ < "$f" 2>/dev/null || continue; [ "$g" = "$1" ] && [ "$s" != Z ] && echo "$p"; done; ` +
  `else kill -0 -- "-$1" 2>/dev/null && echo "group $1"; fi; true; }`;

function withLease(world: ConformanceWorld, fn: (lease: AcquiredLease) => Promise<void>): Promise<void> {
  requireMethods(world, EXEC_METHODS);
  return world.withLease(fn);
}

export const executeCases: ConformanceCase[] = [
  {
    name: "execute-stdout-stderr",
    run: (world) =>
      withLease(world, async (lease) => {
        const result = await world.sh(lease, "printf 'to stdout'; printf 'to stderr' >&2");
        expectOk(result, "stdout/stderr");
        assert.equal(result.stdout, "to stdout");
        assert.equal(result.stderr, "to stderr");
      }),
  },
  {
    name: "execute-exit-codes",
    run: (world) =>
      withLease(world, async (lease) => {
        expectExit(await world.sh(lease, "exit 0"), 0, "exit 0");
        expectExit(await world.sh(lease, "exit 3"), 3, "exit 3");
        const direct = await world.client.env.execute({ ...world.base(lease.config), lease: lease.lease, command: "false", cwd: lease.remoteCwd });
        expectExit(direct, 1, "`false` run as a command, not a script");
      }),
  },
  {
    name: "execute-argument-quoting",
    run: (world) =>
      withLease(world, async (lease) => {
        const result = await world.client.env.execute({
          ...world.base(lease.config),
          lease: lease.lease,
          command: "printf",
          args: ["%s\\n", ...HOSTILE_ARGUMENTS],
          cwd: lease.remoteCwd,
        });
        expectOk(result, "printf with hostile args");
        assert.equal(result.stdout, HOSTILE_ARGUMENTS.map((arg) => `${arg}\n`).join(""));
      }),
  },
  {
    name: "execute-env",
    run: (world) =>
      withLease(world, async (lease) => {
        const env = { CONFORMANCE_SPACES: "value with spaces", CONFORMANCE_LITERAL: "$HOME `id` 'q' \"dq\"" };
        const script = `printf '%s|%s' "$CONFORMANCE_SPACES" "$CONFORMANCE_LITERAL"`;
        const withEnv = await world.sh(lease, script, { env });
        expectOk(withEnv, "env");
        assert.equal(withEnv.stdout, `${env.CONFORMANCE_SPACES}|${env.CONFORMANCE_LITERAL}`);
        // Per command: the next command must not inherit it.
        const without = await world.sh(lease, `printf '%s' "\${CONFORMANCE_SPACES-unset}"`);
        expectOk(without, "env not carried over");
        assert.equal(without.stdout, "unset");
      }),
  },
  {
    name: "execute-cwd",
    run: (world) =>
      withLease(world, async (lease) => {
        expectOk(await world.sh(lease, "mkdir -p 'sub dir/inner'"), "mkdir");
        const inSub = await world.sh(lease, "pwd -P", { cwd: `${lease.remoteCwd}/sub dir/inner` });
        expectOk(inSub, "cwd");
        const expected = await world.sh(lease, "cd 'sub dir/inner' && pwd -P");
        assert.equal(inSub.stdout.trim(), expected.stdout.trim());
        assert.ok(inSub.stdout.trim().endsWith("/sub dir/inner"), `cwd not honoured: ${inSub.stdout}`);
      }),
  },
  {
    name: "execute-stdin",
    run: (world) =>
      withLease(world, async (lease) => {
        for (const stdin of ["hello\n", "line 1\nline 2 ünï\n\nlast line without newline", ""]) {
          // Empty stdin must still be EOF: a cat left waiting for more runs into the timeout (not ok).
          const result = await world.sh(lease, "cat", { stdin, timeoutMs: 30_000 });
          expectOk(result, `stdin ${JSON.stringify(stdin.slice(0, 20))} (a timeout means cat waited for stdin that never ended)`);
          assert.equal(result.stdout, stdin);
        }
      }),
  },
  {
    name: "execute-live-output",
    run: (world) =>
      withLease(world, async (lease) => {
        const chunks: Array<{ stream: string; chunk: string; at: number }> = [];
        const result = await world.sh(lease, "printf 'first\\n'; sleep 1; printf 'second\\n'; printf 'err\\n' >&2", {
          call: { onLog: (stream, chunk) => chunks.push({ stream, chunk, at: Date.now() }) },
        });
        const returnedAt = Date.now();
        expectOk(result, "live output");
        const stdoutLive = chunks
          .filter((c) => c.stream === "stdout")
          .map((c) => c.chunk)
          .join("");
        const stderrLive = chunks
          .filter((c) => c.stream === "stderr")
          .map((c) => c.chunk)
          .join("");
        assert.equal(stdoutLive, "first\nsecond\n", "execute.log stdout chunks must add up to the output");
        assert.equal(stderrLive, "err\n");
        const first = chunks.find((c) => c.chunk.includes("first"));
        assert.ok(first, "no live chunk for 'first'");
        assert.ok(returnedAt - first.at >= 500, `'first' arrived ${returnedAt - first.at}ms before the result: not live`);
      }),
  },
  {
    // The host runs a long in-run command (the ACP bridge's session command: bypassSession false)
    // and, while it runs, control commands on the same lease (bypassSession true): a provider that
    // queued executes behind a running one, or tied them to one shell, would hang the run. Here the
    // long command waits for a file only the second command creates, so it ends only if the second
    // ran beside it; its loop's bound turns a queued second command into a failure, not a hang.
    name: "execute-control-command-beside-session-command",
    run: (world) =>
      withLease(world, async (lease) => {
        const gate = `control-gate-${Date.now().toString(36)}`;
        const session = world.sh(lease, `i=0; until [ -e ${gate} ]; do i=$((i+1)); [ "$i" -gt 600 ] && exit 3; sleep 0.05; done; echo session-released`, {
          bypassSession: false,
        });
        const control = await world.sh(lease, `touch ${gate} && echo control-ran`, { bypassSession: true });
        expectOk(control, "control command beside a running one");
        assert.equal(control.stdout, "control-ran\n");
        const long = await session;
        assert.notEqual(long.exitCode, 3, "the long command was never released: the control command waited for it");
        expectOk(long, "long command");
        assert.equal(long.stdout, "session-released\n");
        expectOk(await world.sh(lease, `rm -f ${gate}`), "clean up");
      }),
  },
  {
    name: "execute-timeout-ends-process-group",
    run: (world) =>
      withLease(world, async (lease) => {
        const script = `echo $$ > t.shell; sleep 30 & echo $! > t.bg; ` + `( read -r _ _ _ _ g _ < /proc/$$/stat && echo "$g" || ps -o pgid= -p $$ ) 2>/dev/null | tr -d ' ' > t.pgid; sleep 30`;
        const started = Date.now();
        const result = await world.sh(lease, `sh -c ${shellQuote(script)}`, { timeoutMs: 1_500 });
        const elapsed = Date.now() - started;
        assert.equal(result.timedOut, true, `timedOut should be true (exit ${result.exitCode})`);
        // Before the command's own end (its sleep 30): the timeout, not the command, ended it.
        assert.ok(elapsed < 25_000, `timeout took ${elapsed}ms to return`);
        // Give the kill a moment to land, then nothing of that group may survive.
        const check = await world.sh(
          lease,
          `${ALIVE_FN}\n${GROUP_MEMBERS_FN}\n` +
            `for i in 1 2 3 4 5 6 7 8 9 10; do left=""; ` +
            `for p in $(cat t.shell t.bg); do alive "$p" && left="$left pid:$p"; done; ` +
            `pg=$(cat t.pgid); [ -n "$pg" ] && for p in $(group_members "$pg"); do left="$left group:$p"; done; ` +
            `[ -z "$left" ] && break; sleep 0.3; done; printf '%s' "$left"`,
        );
        expectOk(check, "liveness check");
        assert.equal(check.stdout.trim(), "", `processes of the timed-out command survived: ${check.stdout}`);
      }),
  },
  {
    name: "background-process-survives",
    run: (world) =>
      withLease(world, async (lease) => {
        expectOk(await world.sh(lease, "nohup sleep 300 >/dev/null 2>&1 & echo $! > bg.pid"), "start background");
        const check = await world.sh(lease, `${ALIVE_FN}\nalive "$(cat bg.pid)" && echo alive || echo gone`);
        try {
          expectOk(check, "check background");
          assert.equal(check.stdout.trim(), "alive", "a background process did not survive to the next execute");
        } finally {
          await world.sh(lease, 'kill "$(cat bg.pid)" 2>/dev/null; true');
        }
      }),
  },
];
