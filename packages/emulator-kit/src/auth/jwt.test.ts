import { describe, expect, it } from "vitest";
import { createJwtIssuer } from "./jwt.js";

describe("createJwtIssuer", () => {
  it("issues JWT-shaped tokens whose claims and exp it verifies", () => {
    const clock = { now: 1_700_000_000_500 };
    const issuer = createJwtIssuer<{ sub: string }>(() => clock.now);
    const { token, expiresAt } = issuer.issue({ sub: "octo" }, 60);
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(expiresAt).toBe(Math.ceil((clock.now + 60_000) / 1000));
    expect(issuer.verify(token)).toMatchObject({ sub: "octo", exp: expiresAt });
    expect(issuer.verify(`Bearer ${token}`)).toMatchObject({ sub: "octo" });
  });

  it("a token lives at least its ttl, then is refused", () => {
    const clock = { now: 1_700_000_000_999 };
    const issuer = createJwtIssuer<{ sub: string }>(() => clock.now);
    const { token } = issuer.issue({ sub: "octo" }, 1);
    clock.now += 999;
    expect(issuer.verify(token)).not.toBeNull();
    clock.now += 1_001;
    expect(issuer.verify(token)).toBeNull();
  });

  it("refuses a forged signature, another issuer's token, and garbage", () => {
    const issuer = createJwtIssuer<{ sub: string }>();
    const { token } = issuer.issue({ sub: "octo" }, 60);
    const [h, p] = token.split(".");
    const forged = `${h}.${Buffer.from(JSON.stringify({ sub: "root", iat: 0, exp: 9e9 })).toString("base64url")}.${token.split(".")[2]}`;
    expect(issuer.verify(forged)).toBeNull();
    expect(createJwtIssuer().verify(token)).toBeNull();
    for (const bad of ["", "a.b", `${h}.${p}.`, "x.y.z", undefined]) expect(issuer.verify(bad)).toBeNull();
  });
});
