import { randomInt } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

function base62(length: number): string {
  let out = "";
  for (let i = 0; i < length; i += 1) out += BASE62[randomInt(BASE62.length)];
  return out;
}

/**
 * Ids in Modal's shapes. The SDK picks a sandbox's RPC family from its id: `sb-` + 22 alphanumerics
 * is a V1 sandbox, anything else V2; so a V2 id must never take the V1 shape.
 */
export const ids = {
  sandboxV1: () => `sb-${base62(22)}`,
  sandboxV2: () => `sb-v2-${base62(20)}`,
  task: () => `ta-${base62(22)}`,
  app: () => `ap-${base62(22)}`,
  image: () => `im-${base62(22)}`,
  secret: () => `st-${base62(22)}`,
  environment: () => `en-${base62(22)}`,
  tokenId: () => `ak-${base62(20)}`,
  tokenSecret: () => `as-${base62(20)}`,
};
