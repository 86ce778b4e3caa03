import path from "node:path";
import type { PluginSyncFileMapping, PluginSyncOperation } from "@paperclipai/plugin-sdk";
import { SyncError } from "./errors.js";

/** Validate the shape of a mapping once, before any byte moves (the SDK types are not enforced at runtime). */
export function checkMapping(mapping: PluginSyncFileMapping): void {
  if (mapping === null || typeof mapping !== "object") {
    throw new SyncError("SYNC_OPTIONS_INVALID", "a file mapping must be an object");
  }
  if (mapping.kind !== "file" && mapping.kind !== "directory") {
    throw new SyncError("SYNC_OPTIONS_INVALID", 'a file mapping\'s kind must be "file" or "directory"');
  }
  if (mapping.mode !== undefined && (!Number.isInteger(mapping.mode) || mapping.mode < 0 || mapping.mode > 0o7777)) {
    throw new SyncError("SYNC_OPTIONS_INVALID", "a file mapping's mode must be an integer between 0 and 0o7777");
  }
  if (mapping.exclude !== undefined && (!Array.isArray(mapping.exclude) || mapping.exclude.some((p) => typeof p !== "string"))) {
    throw new SyncError("SYNC_OPTIONS_INVALID", "a file mapping's exclude must be an array of strings");
  }
}

export function checkOperation(operation: PluginSyncOperation): void {
  if (operation === null || typeof operation !== "object" || typeof operation.operationId !== "string") {
    throw new SyncError("SYNC_OPTIONS_INVALID", "a sync operation needs a string operationId");
  }
  if (!Array.isArray(operation.files)) {
    throw new SyncError("SYNC_OPTIONS_INVALID", `operation ${operation.operationId} has no files array`);
  }
  if (operation.postUploadCommands !== undefined && !Array.isArray(operation.postUploadCommands)) {
    throw new SyncError("SYNC_OPTIONS_INVALID", `operation ${operation.operationId} has a malformed postUploadCommands`);
  }
}

/** Host paths come from the orchestrator; we only insist on absolute and never the filesystem root. */
export function hostPath(candidate: string, what: string): string {
  if (typeof candidate !== "string" || !path.isAbsolute(candidate) || candidate.includes("\0")) {
    throw new SyncError("SYNC_PATH_INVALID", `${what} must be an absolute host path`);
  }
  const resolved = path.resolve(candidate);
  if (resolved === path.parse(resolved).root) {
    throw new SyncError("SYNC_PATH_INVALID", `${what} must not be the filesystem root`);
  }
  return resolved;
}

export function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8)}`;
}
