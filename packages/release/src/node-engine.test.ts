import { describe, expect, it } from "vitest";
import { minimumNodeVersion, nodeSatisfies } from "./node-engine.js";

describe("engines.node", () => {
  it("reads a >=X.Y.Z minimum and nothing else", () => {
    expect(minimumNodeVersion(">=22.19.0")).toEqual([22, 19, 0]);
    expect(minimumNodeVersion(" >= 20.3.0 ")).toEqual([20, 3, 0]);
    expect(minimumNodeVersion("^22")).toBeNull();
    expect(minimumNodeVersion(undefined)).toBeNull();
  });

  it("compares versions part by part, not as text", () => {
    expect(nodeSatisfies(">=22.19.0", "20.20.2")).toBe(false);
    expect(nodeSatisfies(">=22.19.0", "22.9.0")).toBe(false);
    expect(nodeSatisfies(">=22.19.0", "v22.19.0")).toBe(true);
    expect(nodeSatisfies(">=22.19.0", "24.1.0")).toBe(true);
    expect(nodeSatisfies(">=20.3.0", "20.10.0")).toBe(true);
  });
});
