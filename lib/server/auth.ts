/**
 * Optional API key: `Authorization: Bearer <key>` on /v1/* routes, as vLLM's --api-key does
 * (health, metrics, version and tokenize stay open for probes and scrapers).
 * @module
 */
import { type ApiError, unauthorized } from "./errors.ts";

/** True for paths the API key protects. */
export function requiresApiKey(path: string): boolean {
  return path === "/v1" || path.startsWith("/v1/");
}

// Compares in time independent of where the strings first differ.
function sameSecret(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** Returns the 401 to send, or undefined when the request may pass. */
export function checkApiKey(req: Request, apiKey: string | undefined): ApiError | undefined {
  if (apiKey === undefined) return undefined;
  const header = req.headers.get("authorization");
  if (header === null) return unauthorized("Missing API key: send it as 'Authorization: Bearer <key>'");
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match || !sameSecret(match[1]!, apiKey)) return unauthorized("Incorrect API key provided");
  return undefined;
}
