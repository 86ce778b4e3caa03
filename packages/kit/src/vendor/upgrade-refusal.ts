import type { IncomingMessage } from "node:http";
import { createRedactor } from "../redact/index.js";
import type { ProviderApiError } from "./api-error.js";
import type { VendorErrorExtractor } from "./error-extract.js";
import { apiErrorFromResponse } from "./response-error.js";

export interface UpgradeRefusalInput {
  vendor: string;
  operation: string;
  /** The vendor's error body reader, as for its HTTP calls. */
  extractError?: VendorErrorExtractor;
  /** Credentials to keep out of the error (the token the upgrade carried). */
  secrets?: readonly string[];
  /** The most of the body read (default 64 KiB). */
  maxBodyBytes?: number;
}

/**
 * The vendor answered a WebSocket upgrade with an HTTP response (`ws`'s `unexpected-response`): the
 * same `ProviderApiError` its HTTP calls give (status classification, the vendor's message,
 * `Retry-After`), marked as having started nothing, since the socket never opened.
 */
export function apiErrorFromUpgradeRefusal(response: IncomingMessage, input: UpgradeRefusalInput): Promise<ProviderApiError> {
  const max = input.maxBodyBytes ?? 64 * 1024;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      const headers = new Headers();
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
      }
      const error = apiErrorFromResponse({
        vendor: input.vendor,
        operation: input.operation,
        status: response.statusCode ?? 0,
        headers,
        body: Buffer.concat(chunks).subarray(0, max),
        redact: createRedactor(input.secrets ?? []),
        ...(input.extractError ? { extractError: input.extractError } : {}),
        now: Date.now(),
      });
      resolve(error.with({ mayHaveTakenEffect: false }));
    };
    response.on("data", (chunk: Buffer) => {
      if (size < max) chunks.push(chunk);
      size += chunk.length;
    });
    response.once("end", finish);
    response.once("error", finish);
  });
}
