/**
 * OpenAI-style error bodies ({"error": {"message", "type", "param", "code"}}) and the mapping from
 * validation and engine errors to HTTP statuses.
 * @module
 */
import type { z } from "zod";
import { AbortedError, CapacityError, WorkerDiedError } from "../core/errors.ts";

/**
 * The JSON body every error response carries, in vLLM's shape (its ErrorResponse / ErrorInfo):
 * `type` names the kind of error as an exception class name ("BadRequestError", "NotFoundError",
 * "InternalServerError", ...), `param` the request field at fault, `code` the HTTP status.
 */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: number };
}

/** An error that becomes one HTTP response with a vLLM-style body. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    message: string,
    /** vLLM's `type`: the kind of error, e.g. "BadRequestError" or "WorkerDiedError". */
    readonly type: string,
    readonly param: string | null = null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  /** The JSON body (`code` is the HTTP status, as vLLM sends it). */
  body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.status } };
  }
}

/** 400 for a bad request field; `param` names the field. */
export function badRequest(message: string, param: string | null = null): ApiError {
  return new ApiError(400, message, "BadRequestError", param);
}

/** 401 for a missing or wrong API key. */
export function unauthorized(message: string): ApiError {
  return new ApiError(401, message, "AuthenticationError");
}

/** 404 for an unknown route or model. */
export function notFound(message: string, param: string | null = null): ApiError {
  return new ApiError(404, message, "NotFoundError", param);
}

/** 405 for a known route called with the wrong method. */
export function methodNotAllowed(method: string, path: string): ApiError {
  return new ApiError(405, `Method ${method} is not allowed on ${path}`, "MethodNotAllowedError");
}

/** 503: the server cannot serve the request now (no live engine, loading, draining, tokenizer full); `type` says why. */
export function unavailable(message: string, type = "ServiceUnavailableError"): ApiError {
  return new ApiError(503, message, type);
}

/** 504 when a request outlives its time limit (`--request-timeout` or `x-request-timeout`). */
export function requestTimedOut(seconds: number, source: string): ApiError {
  return new ApiError(
    504,
    `The request did not finish within its ${seconds} s time limit (${source}) and was stopped`,
    "RequestTimeoutError",
  );
}

/** 503 for a request the server ended because it shut down (the drain deadline passed). */
export function shutDown(drainSeconds: number): ApiError {
  return new ApiError(
    503,
    `The server shut down before this request finished (--drain-timeout ${drainSeconds} s passed)`,
    "ServerShutdownError",
  );
}

/** Renders an ApiError as a JSON response. */
export function errorResponse(err: ApiError, headers?: Record<string, string>): Response {
  return Response.json(err.body(), { status: err.status, headers });
}

/** Joins a zod issue path the way OpenAI names params: `messages[0].content`. */
export function formatParamPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out += out === "" ? String(p) : `.${String(p)}`;
  }
  return out;
}

/** Short JSON of a bad value for an error message (long values are cut). */
function describeValue(v: unknown): string {
  let s: string;
  try {
    s = v === undefined ? "undefined" : JSON.stringify(v);
  } catch {
    s = String(v);
  }
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** Turns the first zod issue into a 400 that names the field and the value it got. */
export function fromZodError(error: z.ZodError): ApiError {
  const issue = error.issues[0];
  if (!issue) return badRequest("Invalid request body");
  const param = formatParamPath(issue.path);
  if (issue.code === "unrecognized_keys") {
    const names = issue.keys.map((k) => (param === "" ? k : `${param}.${k}`));
    return badRequest(
      `Unknown field${names.length > 1 ? "s" : ""} ${names.map((n) => `'${n}'`).join(", ")}: ` +
        "this endpoint has no such field (LMPool refuses fields it does not know instead of ignoring them)",
      names[0]!,
    );
  }
  if (param === "" && issue.code === "invalid_type") return badRequest("Request body must be a JSON object");
  const hasInput = "input" in issue && issue.input !== undefined;
  if (!hasInput && (issue.code === "invalid_type" || issue.code === "invalid_union")) {
    return badRequest(`Missing required parameter '${param}'`, param);
  }
  const got = hasInput ? ` (got ${describeValue((issue as { input: unknown }).input)})` : "";
  // A refusal that names its field already says what is wrong with it.
  if (issue.code === "custom" && issue.message.startsWith("'")) {
    return badRequest(`${issue.message}${got}`, param === "" ? null : param);
  }
  const where = param === "" ? "Request body" : `Invalid value for '${param}'`;
  return badRequest(`${where}: ${issue.message}${got}`, param === "" ? null : param);
}

/**
 * Maps anything a route threw to an ApiError: engine capacity 400s, a dead worker 503
 * (WorkerDiedError, saying why), else 500.
 * (Bad arguments are caught as 400s where the server validates them, so a stray TypeError here is
 * our bug and stays a 500.)
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof CapacityError) return badRequest(err.message);
  if (err instanceof AbortedError) return new ApiError(499, err.message, "RequestAbortedError");
  if (err instanceof WorkerDiedError) {
    const rank = err.rank >= 0 ? ` (rank ${err.rank})` : "";
    return new ApiError(
      503,
      `The worker serving this request died${rank} before it finished; retry it: ${err.message}`,
      "WorkerDiedError",
      null,
      { cause: err },
    );
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError(500, `Internal server error: ${message}`, "InternalServerError", null, { cause: err });
}
