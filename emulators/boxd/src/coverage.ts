import type { CoverageEntry, CoverageSpec, SdkOperation } from "@paperclip-sandbox/emulator-kit";

const SERVICE_PATH = "/boxd.api.v1.BoxdApi";

const served = (reason?: string): CoverageEntry => ({ status: "served", ...(reason ? { reason } : {}) });
const refused = (reason: string): CoverageEntry => ({ status: "refused", reason });

/**
 * RPCs of boxd's full service (docs.boxd.sh's api.proto) that the proto subset does not carry: the
 * emulator answers them UNIMPLEMENTED `emulator limit: <reason>` and records them as refused.
 */
export const REFUSED_RPCS: Readonly<Record<string, string>> = {
  RebootVm: "not emulated: a reboot is a stop and a start (StopVm, StartVm are served)",
  StreamLogs: "no console or boot log: a jail has no serial console",
  CreateNetwork: "machines have no network here (only the jail's loopback)",
  ListNetworks: "machines have no network here (only the jail's loopback)",
  BindDomain: "no public proxy or domains on loopback",
  UnbindDomain: "no public proxy or domains on loopback",
  ListDomains: "no public proxy or domains on loopback",
};

/** Every RPC of the proto subset, and the documented ones it refuses, as the emulator answers them. */
export const BOXD_COVERAGE: CoverageSpec = {
  operations: Object.fromEntries(
    Object.entries({
      CreateVm: served("sizes 1/2/4/8 vcpu, labels, isolated, org fence, name rule, quota"),
      CreateVmFromSnapshot: served("the snapshot's disk and size"),
      DestroyVm: served("answers at once; destroying until the jail is gone"),
      StartVm: served(),
      StopVm: served("cold: processes end, the disk stays"),
      GetVm: served("by id or name, in the key's org"),
      ListVms: served("by label"),
      Exec: served("bidi; `tty` runs the command on a real terminal (no size: ExecChunk carries none)"),
      Whoami: served(),
      UploadFileStream: served("0644, parents made"),
      WriteFile: served("mode at creation; UNIMPLEMENTED on a legacy agent"),
      SuspendVm: served("the backend's freeze"),
      ResumeVm: served(),
      WakeVm: served(),
      HibernateVm: served("the backend's freeze, its own status"),
      SetAutoSuspendTimeout: served("idle timer on boxd's clock"),
      SetAutoHibernateTimeout: served("idle timer on boxd's clock (4 h by default)"),
      SetAutoDestroyTimeout: served("the delete timer on boxd's clock"),
      CreateSnapshot: served("a copy of the disk (not the memory)"),
      GetSnapshot: served(),
      DeleteSnapshot: served(),
      ListSnapshots: served("the key's org, by name; each name's latest version"),
      ResizeVm: served("a cold reboot of a running machine"),
      ...Object.fromEntries(Object.entries(REFUSED_RPCS).map(([name, reason]) => [name, refused(reason)])),
    }).map(([name, entry]) => [`BoxdApi.${name}`, entry]),
  ),
};

/** The operations: the proto's methods plus the documented ones outside it. */
export function boxdOperations(protoMethods: readonly string[]): SdkOperation[] {
  return [...protoMethods, ...Object.keys(REFUSED_RPCS)].map((name) => ({ group: "BoxdApi", name, route: `${SERVICE_PATH}/${name}` }));
}

export const refusedPaths = (): Record<string, string> => Object.fromEntries(Object.entries(REFUSED_RPCS).map(([name, reason]) => [`${SERVICE_PATH}/${name}`, reason]));
