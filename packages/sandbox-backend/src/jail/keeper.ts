/**
 * The jail's keeper: a small POSIX shell process on the host that is bwrap's parent (bwrap runs
 * with --die-with-parent) and ends the jail at the sandbox's deadline.
 *
 * Why a keeper and not the supervisor: sandboxed code can stop or kill the supervisor, but it
 * cannot reach the keeper. The keeper lives in the host's pid namespace (invisible from the jail),
 * and its deadline file sits in the sandbox directory, of which only subdirectories are bound into
 * the jail. The keeper is detached (its own session), so it survives worker restarts.
 *
 * Why not `timeout`: the deadline must be able to move. The keeper sleeps until the deadline (in
 * naps of at most a minute, so a keeper killed by force leaves at most a short `sleep` behind),
 * and re-reads the deadline file when woken by SIGUSR1 (extendTtl writes the file, then signals).
 * SIGCHLD wakes it when the jail ends, and it exits with the jail's status. At the deadline it
 * SIGKILLs bwrap (the jail's init follows, by bwrap's parent-death signal, and the kernel ends
 * every process of the pid namespace), then thaws the freezer cgroup so frozen tasks can die.
 * A keeper that is itself killed takes the jail with it (bwrap's parent-death signal).
 */
import fsp from "node:fs/promises";
import { processAlive } from "../store/proc.js";

export const KEEPER_NAME = "paperclip-keeper";

/**
 * $1 deadline file  $2 first nap (ms)  $3 file to write at expiry to thaw a frozen jail ("" for none)
 * $4 what to write there  $5 file to write the jail's exit status to when it ends on its own ("" for
 * none)  $6... cgroup.procs files the jail joins  --  the bwrap command
 */
export const KEEPER_SCRIPT = String.raw`
nap=
jail=
trap '[ -n "$nap" ] && kill "$nap" 2>/dev/null' USR1 CHLD
trap 'stop_jail; exit 143' TERM
stop_jail() {
  [ -n "$jail" ] && kill -KILL "$jail" 2>/dev/null
  [ -n "$thaw_file" ] && echo "$thaw_value" > "$thaw_file" 2>/dev/null
  [ -n "$nap" ] && kill "$nap" 2>/dev/null
}
deadline_file=$1 remaining=$2 thaw_file=$3 thaw_value=$4 exit_file=$5
shift 5
if [ "$1" = -- ]; then
  shift
  "$@" &
else
  # Join every cgroup first, then become bwrap: nothing of the jail runs outside them.
  sh -c 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 121; shift; done; shift; exec "$@"' sh "$@" &
fi
jail=$!
# The jail holds its own copies of the supervisor socket and of the info, config, args, seccomp,
# loader and node descriptors.
exec 3>&- 4>&- 5<&- 6<&- 7<&- 8<&- 9<&-
deadline=
while kill -0 "$jail" 2>/dev/null; do
  if [ "$remaining" -le 0 ]; then
    echo "[keeper $(date -u +%FT%TZ)] deadline reached: ending the jail" >&2
    stop_jail
    exit 0
  fi
  n=$remaining
  [ "$n" -gt 60000 ] && n=60000
  sleep "$((n / 1000)).$((n % 1000 / 100))$((n % 100 / 10))$((n % 10))" &
  nap=$!
  wait "$nap"
  kill "$nap" 2>/dev/null
  nap=
  read -r next < "$deadline_file" 2>/dev/null
  case $next in '' | *[!0-9]*) ;; *) deadline=$next ;; esac
  now=$(date +%s%N)
  now=${"$"}{now%??????}
  if [ -n "$deadline" ]; then remaining=$((deadline - now)); else remaining=0; fi
done
wait "$jail"
status=$?
[ -n "$exit_file" ] && echo "$status" > "$exit_file"
exit "$status"
`;

/** Writes the deadline (epoch ms) atomically; the keeper reads it when woken or at its next nap. */
export async function writeDeadline(file: string, epochMs: number): Promise<void> {
  const temp = `${file}.${process.pid}.${Math.random().toString(36).slice(2, 8)}.tmp`;
  await fsp.writeFile(temp, `${Math.floor(epochMs)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
}

/** Wakes the keeper to re-read its deadline; false when it is gone (then so is the jail). */
export function wakeKeeper(keeperPid: number, keeperStartTime: string | null): boolean {
  if (!processAlive(keeperPid, keeperStartTime)) return false;
  try {
    process.kill(keeperPid, "SIGUSR1");
    return true;
  } catch {
    return false;
  }
}
