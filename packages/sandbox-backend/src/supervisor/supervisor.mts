// Entry of the in-jail supervisor, bound at /opt/paperclip/supervisor.mjs; its modules are bound
// next to it at /opt/paperclip/in-jail/ (see in-jail/main.mts). Before anything else it reads its
// config (fd in argv) and starts using up the guarded pids; while the rest of its modules load it
// closes what it inherited, and it serves once the guard is in place (in-jail/hardening.mts).
import { readConfig } from "./in-jail/config.mjs";
import { closeInheritedDescriptors, ignoreInspectorSignal, reserveGuardedPids } from "./in-jail/hardening.mjs";

const config = readConfig(process.argv[2]);
const guard = config.guardedPidMax ? reserveGuardedPids(config.guardedPidMax) : Promise.resolve(null);
const main = import("./in-jail/main.mjs");
closeInheritedDescriptors(new Set([0, 1, 2, 3]));
ignoreInspectorSignal();
(await main).startSupervisor(config, guard);
