// boxd publishes no SDK: the provider ships the subset of boxd's api.proto it speaks, and the
// emulator serves the same subset. The two copies must never drift apart, or the provider would be
// proven against a wire it does not speak.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BOXD_PROTO_PATH as SERVED } from "@paperclip-sandbox/emulator-boxd";
import { BOXD_PROTO_PATH as SHIPPED } from "./wire.js";

describe("boxd.proto", () => {
  it("the proto the provider ships is byte for byte the one the emulator serves", () => {
    expect(SHIPPED).not.toBe(SERVED);
    expect(readFileSync(SHIPPED, "utf8")).toBe(readFileSync(SERVED, "utf8"));
  });
});
