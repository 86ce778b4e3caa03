const SECRET_KEY_PATTERN = /(secret|token|password|passwd|api[-_]?key|private[-_]?key|credential|authorization|cookie)/i;

/**
 * A field, header or query-parameter name whose value is a secret whatever it looks like
 * (`apiToken`, `X-Api-Key`, `client_secret`, `Authorization`, `Cookie`).
 */
export function isSecretLookingKey(key: string): boolean {
  return SECRET_KEY_PATTERN.test(key);
}
