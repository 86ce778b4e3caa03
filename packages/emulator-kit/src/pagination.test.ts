import { describe, expect, it } from "vitest";
import { afterEach } from "vitest";
import { runEmulator, type RunningEmulator } from "./emulator.js";
import { echoEmulator } from "./example/echo.js";
import { encodeCursor, paginate } from "./pagination.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

const ids = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `s${String(i).padStart(3, "0")}` }));
const key = (item: { id: string }) => item.id;

describe("cursor pagination", () => {
  it("walks every item once, in key order, ending with no cursor", () => {
    const items = ids(25).reverse();
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = paginate(items, { cursor, limit: 10 }, { key });
      seen.push(...page.items.map(key));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids(25).map(key));
    expect(paginate(ids(10), { limit: 10 }, { key }).nextCursor).toBeUndefined();
  });

  it("neither repeats nor skips when items change between pages", () => {
    const items = ids(6);
    const first = paginate(items, { limit: 3 }, { key });
    const changed = [...items.filter((item) => item.id !== "s001"), { id: "s0000" }, { id: "s999" }];
    const second = paginate(changed, { cursor: first.nextCursor, limit: 3 }, { key });
    expect(second.items.map(key)).toEqual(["s003", "s004", "s005"]);
  });

  it("rejects bad limits and foreign cursors with 400", () => {
    expect(() => paginate(ids(3), { limit: 0 }, { key })).toThrow("limit: must be an integer within 1..1000 (got 0)");
    expect(() => paginate(ids(3), { cursor: "not-a-cursor" }, { key })).toThrow("cursor: not a cursor this server issued");
    expect(paginate(ids(3), { cursor: encodeCursor("s000") }, { key }).items.map(key)).toEqual(["s001", "s002"]);
  });

  it("pages through the emulator with an X-Next-Token header", async () => {
    emulator = await runEmulator(echoEmulator);
    const headers = { "x-api-key": emulator.credentials.apiKey! };
    for (let i = 0; i < 5; i++) await fetch(`${emulator.url}/items`, { method: "POST", headers, body: JSON.stringify({ name: `n${i}` }) });
    const names: string[] = [];
    let token: string | null = "";
    do {
      const response: Response = await fetch(`${emulator.url}/items?limit=2${token ? `&cursor=${token}` : ""}`, { headers });
      names.push(...((await response.json()) as Array<{ name: string }>).map((item) => item.name));
      token = response.headers.get("x-next-token");
    } while (token);
    expect(names).toEqual(["n0", "n1", "n2", "n3", "n4"]);
  });
});
