import grpc from "@grpc/grpc-js";
import { checkCredential, type CredentialRule } from "../auth/credential.js";
import { GrpcError } from "./status.js";

export interface GrpcAuthRule<P = string> extends CredentialRule<P> {
  /** Metadata key (default `authorization`). */
  key?: string;
  /** Expect `Bearer <token>` (default true when the key is `authorization`). */
  bearer?: boolean;
  missingMessage?: string;
  invalidMessage?: string;
  forbiddenMessage?: string;
}

/** UNAUTHENTICATED for a missing or unknown credential, PERMISSION_DENIED when `authorize` refuses. */
export function requireGrpcCredential<P = string>(metadata: grpc.Metadata, rule: GrpcAuthRule<P>): P {
  const key = (rule.key ?? "authorization").toLowerCase();
  const bearer = rule.bearer ?? key === "authorization";
  const raw = metadata.get(key)[0];
  let presented = typeof raw === "string" ? raw : raw?.toString("utf8");
  if (presented !== undefined && bearer) {
    const match = /^Bearer[ \t]+(\S.*)$/i.exec(presented.trim());
    if (!match) throw new GrpcError(grpc.status.UNAUTHENTICATED, rule.invalidMessage ?? "invalid credentials");
    presented = match[1]!.trim();
  }
  const check = checkCredential(presented, rule);
  if (check.ok) return check.principal;
  if (check.reason === "forbidden") throw new GrpcError(grpc.status.PERMISSION_DENIED, rule.forbiddenMessage ?? "not permitted");
  throw new GrpcError(grpc.status.UNAUTHENTICATED, check.reason === "missing" ? (rule.missingMessage ?? "missing credentials") : (rule.invalidMessage ?? "invalid credentials"));
}
