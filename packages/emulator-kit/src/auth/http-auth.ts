import type { HttpContext } from "../http/context.js";
import { HttpError } from "../http/errors.js";
import type { WebSocketContext } from "../http/websocket.js";
import { checkCredential, type CredentialRule } from "./credential.js";

export interface AuthAnswers {
  /** Status for no credential (default 401). */
  missingStatus?: 401 | 403;
  /** Status for an unknown credential (default 401; some vendors say 403). */
  invalidStatus?: 401 | 403;
  /** Messages put into the vendor's error envelope. */
  missingMessage?: string;
  invalidMessage?: string;
  forbiddenMessage?: string;
  /** Vendor error code for the envelope (`unauthorized`, `Unauthenticated`…). */
  code?: string;
  /** `WWW-Authenticate` value sent with 401s (e.g. `Bearer realm="api"`). */
  challenge?: string;
}

export interface ApiKeyRule<P = string> extends CredentialRule<P>, AuthAnswers {
  /** The header carrying the key, e.g. `x-api-key`. */
  header: string;
}

export interface BearerRule<P = string> extends CredentialRule<P>, AuthAnswers {
  /** Header name (default `authorization`); the value must be `Bearer <token>`. */
  header?: string;
  /** Also accept the token as this query parameter (WebSocket clients in browsers do this). */
  queryParam?: string;
}

type AuthContext = Pick<HttpContext | WebSocketContext, "header" | "query">;

/** Answers 401/403 through the vendor's envelope (thrown as {@link HttpError}) or returns the principal. */
export function requireApiKey<P = string>(ctx: AuthContext, rule: ApiKeyRule<P>): P {
  return decide(checkCredential(ctx.header(rule.header), rule), rule);
}

export function requireBearer<P = string>(ctx: AuthContext, rule: BearerRule<P>): P {
  const raw = ctx.header(rule.header ?? "authorization");
  let token: string | undefined;
  if (raw !== undefined) {
    const match = /^Bearer[ \t]+(\S.*)$/i.exec(raw.trim());
    token = match ? match[1]!.trim() : ""; // a non-Bearer scheme is a bad credential, not a missing one
    if (!match) return decide<P>({ ok: false, reason: "invalid" }, rule);
  } else if (rule.queryParam) {
    token = ctx.query.get(rule.queryParam) ?? undefined;
  }
  return decide(checkCredential(token, rule), rule);
}

function decide<P>(check: ReturnType<typeof checkCredential<P>>, answers: AuthAnswers): P {
  if (check.ok) return check.principal;
  const status = check.reason === "missing" ? (answers.missingStatus ?? 401) : check.reason === "invalid" ? (answers.invalidStatus ?? 401) : 403;
  const message =
    check.reason === "missing"
      ? (answers.missingMessage ?? "missing credentials")
      : check.reason === "invalid"
        ? (answers.invalidMessage ?? "invalid credentials")
        : (answers.forbiddenMessage ?? "not permitted");
  const headers: Record<string, string> = status === 401 && answers.challenge ? { "www-authenticate": answers.challenge } : {};
  throw new HttpError(status, message, { ...(answers.code === undefined ? {} : { code: answers.code }), headers });
}
