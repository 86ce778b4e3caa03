// `paperclip-sandbox emulate`: a vendor emulator from the command line, until Ctrl-C.
import { describe, expect, it } from "vitest";
import { runCli, startCli, waitFor } from "./__fixtures__/cli-harness.js";

describe("paperclip-sandbox emulate", () => {
  it("lists the installed emulators", async () => {
    const r = await runCli(["emulate", "--list"]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")).toContain("example");
  });

  it("runs the example emulator, prints its URL and credential, serves real sandboxes, and cleans up on SIGINT", async () => {
    const cli = startCli(["emulate", "example", "--json"]);
    await waitFor(() => cli.stdout().includes("\n"), 30_000, "the emulator's first line");
    const info = JSON.parse(cli.stdout().split("\n")[0]!) as { url: string; credentials: { token: string } };
    expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const headers = { authorization: `Bearer ${info.credentials.token}`, "content-type": "application/json" };
    const created = (await (await fetch(`${info.url}/v1/sandboxes`, { method: "POST", headers, body: "{}" })).json()) as { id: string };
    const exec = (await (await fetch(`${info.url}/v1/sandboxes/${created.id}/exec`, { method: "POST", headers, body: JSON.stringify({ script: "echo hello" }) })).json()) as {
      stdout: string;
    };
    expect(Buffer.from(exec.stdout, "base64").toString()).toBe("hello\n");
    cli.child.kill("SIGINT");
    const result = await cli.done;
    expect(result.code).toBe(0);
    await expect(fetch(`${info.url}/health`)).rejects.toThrow();
  });

  it("runs the boxd emulator: its gRPC URL, the token exchange endpoint and a bxd_ key", async () => {
    const cli = startCli(["emulate", "boxd", "--json"]);
    await waitFor(() => cli.stdout().includes("\n"), 30_000, "the emulator's first line");
    const info = JSON.parse(cli.stdout().split("\n")[0]!) as { url: string; endpoints: { exchange: string }; credentials: { apiKey: string } };
    expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(info.credentials.apiKey).toMatch(/^bxd_[A-Za-z0-9]{40}$/);
    const exchange = await fetch(info.endpoints.exchange, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ api_key: info.credentials.apiKey }) });
    expect(exchange.status).toBe(200);
    expect(await exchange.json()).toMatchObject({ token: expect.any(String), expires_at: expect.any(Number) });
    cli.child.kill("SIGINT");
    expect((await cli.done).code).toBe(0);
  });

  it("refuses an unknown vendor with the list of known ones", async () => {
    const r = await runCli(["emulate", "nosuch"]);
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(/unknown vendor 'nosuch' \(known: .*example/);
  });
});
