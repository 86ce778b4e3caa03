import { describe, expect, it } from "vitest";
import { createResolver, parseResolveOverrides } from "./resolver.js";

describe("PAPERCLIP_BUBBLEWRAP_RESOLVE", () => {
  it("parses name=ip pairs, lowercasing names and ignoring malformed items", () => {
    const map = parseResolveOverrides(" API.Test.=127.0.0.2, other.test=::1,broken,x=notanip,api.test=127.0.0.3");
    expect([...map.entries()]).toEqual([
      ["api.test", ["127.0.0.2", "127.0.0.3"]],
      ["other.test", ["::1"]],
    ]);
  });

  it("answers pinned names without DNS and says they are pinned", async () => {
    const resolve = createResolver(parseResolveOverrides("pinned.test=127.0.0.9"));
    expect(await resolve("PINNED.test")).toEqual(["127.0.0.9"]);
    expect(resolve.pinned("pinned.test")).toBe(true);
    expect(resolve.pinned("other.test")).toBe(false);
  });
});
