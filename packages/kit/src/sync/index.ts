export { syncIn } from "./sync-in.js";
export { syncOut } from "./sync-out.js";
export { MAX_LISTED_SKIPPED_LINKS, type SyncOperationResult, type SyncResult } from "./operations.js";
export { base64SyncIn, base64SyncOut, DEFAULT_BASE64_CHUNK_BYTES, type Base64SyncOptions } from "./base64-sync.js";
export { SyncError, isSyncError, type SyncErrorCode } from "./errors.js";
export { DEFAULT_MAX_OUTBOUND_BYTES, DEFAULT_MAX_STDERR_BYTES, type SyncOptions } from "./options.js";
export { POST_UPLOAD_COMMAND_ENV } from "./post-upload.js";
export { compileExcludes, type ExcludeMatcher } from "./exclude-glob.js";
