/**
 * Reads a request body under a byte limit (`--max-request-bytes`), before anything parses it: a
 * declared Content-Length over the limit is refused at once, and a body without one (chunked) is
 * counted while it streams in and dropped as soon as it passes the limit, so a large body never
 * sits in memory whole.
 * @module
 */
import { ApiError } from "./errors.ts";

/** Default body limit: 4 MiB. */
export const DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024;

/** 413 for a body over the limit; `atLeast` when the body was cut off while streaming. */
function requestTooLarge(bytes: number, maxBytes: number, atLeast = false): ApiError {
  return new ApiError(
    413,
    `Request body of ${
      atLeast ? "at least " : ""
    }${bytes} bytes exceeds --max-request-bytes ${maxBytes}; send a smaller body or raise the limit`,
    "RequestTooLargeError",
  );
}

/** The declared Content-Length, or undefined when absent or unreadable (then the stream is counted). */
function declaredLength(req: Request): number | undefined {
  const header = req.headers.get("content-length");
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

/** Refuses at once a request whose Content-Length is over the limit (before any byte is read). */
export function checkDeclaredLength(req: Request, maxBytes: number): void {
  const n = declaredLength(req);
  if (n !== undefined && n > maxBytes) throw requestTooLarge(n, maxBytes);
}

/** The body as UTF-8 text, read up to `maxBytes`; more is a 413 and the rest is not read. */
export async function readBodyText(req: Request, maxBytes: number): Promise<string> {
  checkDeclaredLength(req, maxBytes);
  if (req.body === null) return "";
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        // Stop reading: the client may be sending gigabytes.
        void reader.cancel().catch(() => {});
        throw requestTooLarge(total, maxBytes, true);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
