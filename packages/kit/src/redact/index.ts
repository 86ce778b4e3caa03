export { createRedactor, REDACTED, MIN_SECRET_LENGTH } from "./redactor.js";
export type { Redactor } from "./redactor.js";
export { redactDeep } from "./redact-deep.js";
export type { RedactDeepOptions } from "./redact-deep.js";
export { isSecretLookingKey } from "./secret-keys.js";
export { createSecretRedactor } from "./secret-redactor.js";
export type { SecretRedactor } from "./secret-redactor.js";
export { createStreamRedactor } from "./stream-redactor.js";
export type { StreamRedactor } from "./stream-redactor.js";
