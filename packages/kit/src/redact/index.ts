export { createRedactor, REDACTED, MIN_SECRET_LENGTH } from "./redactor.js";
export type { Redactor } from "./redactor.js";
export { redactDeep } from "./redact-deep.js";
