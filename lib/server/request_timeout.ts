/**
 * The time limit of one request: the server's `--request-timeout` and the client's
 * `x-request-timeout` header (seconds). The header may only shorten the server's limit, so an
 * operator's bound holds whatever clients send.
 * @module
 */
import { type ApiError, badRequest, requestTimedOut } from "./errors.ts";

/** The header a client sets to bound its own request, in seconds. */
const REQUEST_TIMEOUT_HEADER = "x-request-timeout";

/** Longest limit a timer can hold (setTimeout's range). */
export const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** A request's limit and the error it ends with. */
export interface RequestTimeout {
  seconds: number;
  error(): ApiError;
}

/** Parses a limit in seconds: a finite number in (0, MAX_TIMEOUT_SECONDS]; undefined when not one. */
export function parseTimeoutSeconds(text: string): number | undefined {
  const v = text.trim() === "" ? Number.NaN : Number(text);
  return v > 0 && v <= MAX_TIMEOUT_SECONDS ? v : undefined;
}

/** The limit of `req` (undefined: none); a bad header is a 400 naming it. */
export function requestTimeoutOf(req: Request, serverSeconds: number | undefined): RequestTimeout | undefined {
  const header = req.headers.get(REQUEST_TIMEOUT_HEADER);
  let clientSeconds: number | undefined;
  if (header !== null) {
    clientSeconds = parseTimeoutSeconds(header);
    if (clientSeconds === undefined) {
      throw badRequest(
        `Invalid ${REQUEST_TIMEOUT_HEADER} header ${
          JSON.stringify(header)
        }: it must be a number of seconds in (0, ${MAX_TIMEOUT_SECONDS}]`,
        REQUEST_TIMEOUT_HEADER,
      );
    }
  }
  if (clientSeconds !== undefined && (serverSeconds === undefined || clientSeconds < serverSeconds)) {
    const seconds = clientSeconds;
    return { seconds, error: () => requestTimedOut(seconds, `${REQUEST_TIMEOUT_HEADER}: ${header}`) };
  }
  if (serverSeconds !== undefined) {
    return {
      seconds: serverSeconds,
      error: () => requestTimedOut(serverSeconds, `--request-timeout ${serverSeconds}`),
    };
  }
  return undefined;
}
