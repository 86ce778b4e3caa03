import { randomUUID } from "node:crypto";
import ssh2 from "ssh2";
import type { ClientChannel } from "ssh2";
import type {
  PluginEnvironmentCancelInteractiveSetupResult,
  PluginEnvironmentCaptureTemplateResult,
  PluginEnvironmentDeleteTemplateResult,
  PluginEnvironmentInteractiveSetupSession,
} from "@paperclipai/plugin-sdk";
import type { ConformanceCase } from "../case.js";
import { requireMethods } from "../case.js";
import { assert, expectOk } from "../expect.js";
import { ConformanceSkip } from "../skip.js";
import type { AcquiredLease, ConformanceWorld } from "../world.js";

const INTERACTIVE_SETUP_METHODS = ["environmentStartInteractiveSetup", "environmentGetInteractiveSetup", "environmentCancelInteractiveSetup"];
const TEMPLATE_CAPTURE_METHODS = ["environmentCaptureTemplate"];
const TEMPLATE_DELETE_METHODS = ["environmentDeleteTemplate"];

/** Setup sandboxes start jails and copy trees: generous under a loaded machine. */
const CALL = { timeoutMs: 180_000 };

/** The host's default binding when a driver declares none (environment-custom-image-runtime.js). */
function bindingField(world: ConformanceWorld): string {
  const declared = world.driver?.templateConfigBinding?.field;
  if (declared) return declared;
  const kind = world.driver?.templateRefKind;
  return kind === "snapshot" ? "snapshot" : kind === "image" ? "image" : kind === "provider_template" ? "template" : "templateRef";
}

/** Skips (naming the driver) unless it declares custom images; declared but unserved hooks fail. */
function requireTemplates(world: ConformanceWorld, needDelete = false): void {
  const driver = world.driver;
  if (driver?.supportsInteractiveSetup !== true || driver.supportsTemplateCapture !== true) {
    throw new ConformanceSkip(`${world.options.driverKey} declares no custom images (supportsInteractiveSetup/supportsTemplateCapture): the host offers it no setup or capture`);
  }
  if (needDelete && driver.supportsTemplateDelete !== true) throw new ConformanceSkip(`${world.options.driverKey} does not declare supportsTemplateDelete`);
  requireMethods(world, ["environmentAcquireLease", "environmentDestroyLease", "environmentExecute"]);
  const wanted = [...INTERACTIVE_SETUP_METHODS, ...TEMPLATE_CAPTURE_METHODS, ...(driver.supportsTemplateDelete ? TEMPLATE_DELETE_METHODS : [])];
  const missing = wanted.filter((method) => !world.client.supportedMethods.includes(method));
  assert.ok(missing.length === 0, `${world.options.driverKey} declares custom images but its worker does not advertise ${missing.join(", ")} (the host refuses it)`);
}

/** The setup sandbox as an acquired lease, so the suite's helpers (and leftovers) know it. */
function setupLease(world: ConformanceWorld, session: PluginEnvironmentInteractiveSetupSession): AcquiredLease {
  assert.ok(session.providerLeaseId, `the setup session must name its sandbox (providerLeaseId), got ${JSON.stringify(session)}`);
  const metadata = session.metadata ?? {};
  const remoteCwd = metadata.remoteCwd;
  assert.ok(typeof remoteCwd === "string" && remoteCwd.startsWith("/"), `the setup session's metadata must carry the sandbox's remoteCwd, got ${JSON.stringify(metadata)}`);
  const lease = { providerLeaseId: session.providerLeaseId, metadata };
  world.track(lease);
  return { lease, providerLeaseId: session.providerLeaseId, remoteCwd, config: world.options.config };
}

/** The host's calls, as environment-custom-images.js makes them. */
function hostCalls(world: ConformanceWorld) {
  const base = () => world.base(world.options.config);
  return {
    start: (sourceTemplateRef: string | null = null) =>
      world.client.call<PluginEnvironmentInteractiveSetupSession>(
        "environmentStartInteractiveSetup",
        {
          ...base(),
          issueId: null,
          sessionId: randomUUID(),
          sourceTemplateRef,
          sourceTemplateKind: sourceTemplateRef ? (world.driver?.templateRefKind ?? null) : null,
          connectionExpiresInMinutes: 15,
          expiresAt: new Date(Date.now() + 60 * 60_000).toISOString(),
        },
        CALL,
      ),
    get: (session: PluginEnvironmentInteractiveSetupSession) =>
      world.client.call<PluginEnvironmentInteractiveSetupSession>(
        "environmentGetInteractiveSetup",
        { ...base(), issueId: null, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, includeConnectionPayload: true, connectionExpiresInMinutes: 15 },
        CALL,
      ),
    capture: (session: PluginEnvironmentInteractiveSetupSession) =>
      world.client.call<PluginEnvironmentCaptureTemplateResult>(
        "environmentCaptureTemplate",
        {
          ...base(),
          issueId: null,
          providerLeaseId: session.providerLeaseId,
          setupMetadata: session.metadata,
          sourceTemplateRef: null,
          previousTemplateRef: null,
          templateLabel: `paperclip-conformance-${randomUUID().slice(0, 8)}`,
          timeoutMs: null,
        },
        CALL,
      ),
    cancel: (session: PluginEnvironmentInteractiveSetupSession, reason: string) =>
      world.client.call<PluginEnvironmentCancelInteractiveSetupResult>(
        "environmentCancelInteractiveSetup",
        { ...base(), issueId: null, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason },
        CALL,
      ),
    remove: (templateRef: string) =>
      world.client.call<PluginEnvironmentDeleteTemplateResult>(
        "environmentDeleteTemplate",
        { ...base(), issueId: null, templateRef, templateKind: world.driver?.templateRefKind, reason: "disabled" },
        CALL,
      ),
  };
}

const MARK = "paperclip-conformance-template";

/** Setup, a file in the workspace and one in $HOME, capture, then the host's cancel (`promoted`). */
async function captureOne(world: ConformanceWorld, token: string): Promise<string> {
  const host = hostCalls(world);
  const session = await host.start();
  const setup = setupLease(world, session);
  try {
    assert.equal(session.status, "waiting_for_user", `a started setup waits for the user, got ${session.status}`);
    expectOk(await world.sh(setup, `echo ${token} > ${MARK}.txt && mkdir -p "$HOME/.${MARK}" && echo ${token} > "$HOME/.${MARK}/tool"`), "install files in the setup sandbox");
    const captured = await host.capture(session);
    assert.ok(typeof captured.templateRef === "string" && captured.templateRef.length > 0, `capture returns a templateRef, got ${JSON.stringify(captured)}`);
    assert.equal(captured.templateKind, world.driver?.templateRefKind, "capture returns the declared templateRefKind");
    return captured.templateRef;
  } finally {
    await host.cancel(session, "promoted");
  }
}

/** The host's parse of an ssh payload (environment-custom-image-terminal-sessions.js): exactly these shapes. */
function hostSshTarget(command: string | null | undefined): { host: string; port: number; username: string } {
  const tokens = (command ?? "").trim().split(/\s+/);
  const [user, host] = (tokens.length === 4 && tokens[0] === "ssh" && tokens[1] === "-p" ? (tokens[3] ?? "") : tokens.length === 2 && tokens[0] === "ssh" ? (tokens[1] ?? "") : "").split("@");
  const port = tokens.length === 4 ? Number(tokens[2]) : 22;
  assert.ok(user && host && Number.isInteger(port) && port > 0 && port < 65536, `the ssh payload must be "ssh <user>@<host>" or "ssh -p <port> <user>@<host>", got ${JSON.stringify(command)}`);
  return { host, port, username: user };
}

/** The host's ssh2 connection: the user name is the credential, no password or key, the host key pinned (here: accepted). */
function sshConnect(target: { host: string; port: number; username: string }): Promise<InstanceType<typeof ssh2.Client>> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.once("ready", () => resolve(client));
    client.once("error", (error) => {
      client.end();
      reject(error);
    });
    client.connect({ ...target, hostHash: "sha256", hostVerifier: () => true, readyTimeout: 120_000 });
  });
}

async function refused(work: Promise<unknown>, what: string): Promise<Error> {
  try {
    await work;
  } catch (error) {
    return error as Error;
  }
  throw new assert.AssertionError({ message: `${what} should have been refused` });
}

export const templateCases: ConformanceCase[] = [
  {
    name: "template-setup-cancel",
    async run(world) {
      requireTemplates(world);
      const host = hostCalls(world);
      const session = await host.start();
      const setup = setupLease(world, session);
      let cancelled = false;
      try {
        assert.equal(session.status, "waiting_for_user");
        const got = await host.get(session);
        assert.equal(got.status, "waiting_for_user", `get of a live setup sandbox: ${JSON.stringify(got)}`);
        assert.equal(got.providerLeaseId, session.providerLeaseId);
        // Another environment names the sandbox: refused, and the sandbox is untouched.
        const foreign = await refused(
          world.client.call(
            "environmentCancelInteractiveSetup",
            { ...world.base(), environmentId: `other-${world.identity.environmentId}`, providerLeaseId: session.providerLeaseId, reason: "cancelled" },
            CALL,
          ),
          "cancelling another environment's setup sandbox",
        );
        assert.match(foreign.message, /does not belong|refusing/i);
        expectOk(await world.sh(setup, "true"), "the setup sandbox still runs after a foreign cancel");
        const result = await host.cancel(session, "cancelled");
        cancelled = true;
        assert.equal(result.status, "cancelled");
        assert.equal((await host.get(session)).status, "missing", "a cancelled setup sandbox is gone");
        assert.equal((await host.cancel(session, "cancelled")).status, "missing", "a second cancel finds nothing");
      } finally {
        if (!cancelled) await host.cancel(session, "cancelled").catch(() => undefined);
      }
    },
  },
  {
    name: "template-capture-and-start",
    async run(world) {
      requireTemplates(world);
      const host = hostCalls(world);
      const token = `tpl${randomUUID().slice(0, 8)}`;
      const templateRef = await captureOne(world, token);
      const field = bindingField(world);
      try {
        // A run of the environment, its config bound to the template as the host binds it.
        await world.withLease(
          async (run) => {
            const found = await world.sh(run, `cat ${MARK}.txt "$HOME/.${MARK}/tool"`);
            expectOk(found, "read the template's files in a run started from it");
            assert.equal(found.stdout, `${token}\n${token}\n`);
          },
          { ...world.options.config, [field]: templateRef },
        );
        // A new setup from the template (the host's "edit the custom image").
        const again = await host.start(templateRef);
        try {
          const found = await world.sh(setupLease(world, again), `cat ${MARK}.txt`);
          assert.equal(found.stdout, `${token}\n`, "a setup started from the template has its files");
        } finally {
          await host.cancel(again, "cancelled");
        }
        // Another environment's config naming the template: refused before any sandbox exists.
        const foreign = await refused(
          world.acquire({ ...world.options.config, [field]: templateRef }, { environmentId: `other-${world.identity.environmentId}` }),
          "a run of another environment started from this environment's template",
        );
        assert.match(foreign.message, /does not belong|refusing/i);
      } finally {
        if (world.driver?.supportsTemplateDelete) await host.remove(templateRef).catch(() => undefined);
      }
    },
  },
  {
    name: "template-delete",
    async run(world) {
      requireTemplates(world, true);
      const host = hostCalls(world);
      const templateRef = await captureOne(world, `del${randomUUID().slice(0, 8)}`);
      const foreign = await refused(
        world.client.call("environmentDeleteTemplate", { ...world.base(), companyId: `other-${world.identity.companyId}`, templateRef, reason: "disabled" }, CALL),
        "deleting another company's template",
      );
      assert.match(foreign.message, /does not belong|refusing/i);
      assert.deepEqual(await host.remove(templateRef), { deleted: true });
      assert.deepEqual(await host.remove(templateRef), { deleted: false }, "a deleted template is not found again");
      const field = bindingField(world);
      const gone = await refused(world.acquire({ ...world.options.config, [field]: templateRef }), "a run from a deleted template");
      assert.ok(gone.message.includes(field), `the error names the config field ${field}: ${gone.message}`);
    },
  },
  {
    name: "template-setup-terminal",
    async run(world) {
      requireTemplates(world);
      const types = world.driver?.interactiveSetupConnectionTypes ?? [];
      if (!types.includes("ssh")) throw new ConformanceSkip(`${world.options.driverKey} declares no "ssh" setup connection: the host's browser terminal offers it none`);
      const host = hostCalls(world);
      const token = `ssh${randomUUID().slice(0, 8)}`;
      const session = await host.start();
      setupLease(world, session);
      let templateRef: string | undefined;
      try {
        assert.equal(session.connectionSummary?.type, "ssh", `the setup session's summary names the ssh connection, got ${JSON.stringify(session.connectionSummary)}`);
        const target = hostSshTarget(session.connectionPayload?.command);
        // A name that is not the token is refused before any shell exists.
        await refused(sshConnect({ ...target, username: `${target.username}x` }), "an SSH login with a wrong token");
        // The host's refresh answers a fresh token for the same sandbox.
        const refreshed = hostSshTarget((await host.get(session)).connectionPayload?.command);
        assert.notEqual(refreshed.username, target.username, "each payload carries a fresh token");
        const client = await sshConnect(refreshed);
        try {
          await refused(
            new Promise((resolve, reject) => client.exec("true", (error, stream) => (error ? reject(error) : resolve(stream)))),
            "an exec request on the setup terminal (only a shell is served)",
          );
          const shell = await new Promise<ClientChannel>((resolve, reject) =>
            client.shell({ term: "xterm-256color", cols: 120, rows: 30 }, { env: { LANG: "C.UTF-8", LC_CTYPE: "C.UTF-8" } }, (error, stream) => (error ? reject(error) : resolve(stream))),
          );
          const exit = new Promise<number | null>((resolve) => shell.once("exit", (code: number | null) => resolve(code)));
          let output = "";
          shell.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
          // Typed as an operator types it: the terminal echoes, the shell runs it, then exits 3.
          shell.write(`mkdir -p "$HOME/.${MARK}" && echo ${token} > "$HOME/.${MARK}/typed" && echo wrote-$((40+2))\r`);
          shell.write("exit 3\r");
          assert.equal(await exit, 3, `the shell's exit status ends the channel; the terminal showed ${JSON.stringify(output.slice(-400))}`);
          assert.ok(output.includes("wrote-42"), `the typed command ran on the terminal: ${JSON.stringify(output.slice(-400))}`);
        } finally {
          client.end();
        }
        const captured = await host.capture(session);
        templateRef = captured.templateRef;
      } finally {
        await host.cancel(session, "promoted");
      }
      try {
        await world.withLease(
          async (run) => {
            const found = await world.sh(run, `cat "$HOME/.${MARK}/typed"`);
            expectOk(found, "read the file typed in the setup terminal, in a run started from the template");
            assert.equal(found.stdout, `${token}\n`);
          },
          { ...world.options.config, [bindingField(world)]: templateRef },
        );
      } finally {
        if (world.driver?.supportsTemplateDelete && templateRef) await host.remove(templateRef).catch(() => undefined);
      }
    },
  },
];
