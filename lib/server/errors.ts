/**
 * OpenAI-style error bodies ({"error": {"message", "type", "param", "code"}}) and the mapping from
 * validation and engine errors to HTTP statuses.
 * @module
 */
import type { z } from "zod";
import { AbortedError, CapacityError, WorkerDiedError } from "../core/errors.ts";

/** The JSON body every error response carries, as OpenAI's API shapes it. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | number | null };
}

/** An error that becomes one HTTP response with an OpenAI-style body. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  /** The OpenAI-style JSON body. */
  body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400 for a bad request field; `param` names the field. */
export function badRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, message, "invalid_request_error", param, code);
}

/** 401 for a missing or wrong API key. */
export function unauthorized(message: string): ApiError {
  return new ApiError(401, message, "invalid_request_error", null, "invalid_api_key");
}

/** 404 for an unknown route or model. */
export function notFound(message: string, param: string | null = null, code = "not_found"): ApiError {
  return new ApiError(404, message, "invalid_request_error", param, code);
}

/** 405 for a known route called with the wrong method. */
export function methodNotAllowed(method: string, path: string): ApiError {
  return new ApiError(
    405,
    `Method ${method} is not allowed on ${path}`,
    "invalid_request_error",
    null,
    "method_not_allowed",
  );
}

/** 503 while the engine is dead, loading, or the server drains. */
export function unavailable(message: string): ApiError {
  return new ApiError(503, message, "server_error", null, "service_unavailable");
}

/** 504 when a request outlives its time limit (`--request-timeout` or `x-request-timeout`). */
export function requestTimedOut(seconds: number, source: string): ApiError {
  return new ApiError(
    504,
    `The request did not finish within its ${seconds} s time limit (${source}) and was stopped`,
    "server_error",
    null,
    "request_timeout",
  );
}

/** 503 for a request the server ended because it shut down (the drain deadline passed). */
export function shutDown(drainSeconds: number): ApiError {
  return new ApiError(
    503,
    `The server shut down before this request finished (--drain-timeout ${drainSeconds} s passed)`,
    "server_error",
    null,
    "shutdown",
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
  if (param === "" && issue.code === "invalid_type") {
    return badRequest("Request body must be a JSON object", null, "invalid_type");
  }
  const hasInput = "input" in issue && issue.input !== undefined;
  if (!hasInput && (issue.code === "invalid_type" || issue.code === "invalid_union")) {
    return badRequest(`Missing required parameter '${param}'`, param, "missing_required_parameter");
  }
  const got = hasInput ? ` (got ${describeValue((issue as { input: unknown }).input)})` : "";
  const where = param === "" ? "Request body" : `Invalid value for '${param}'`;
  return badRequest(`${where}: ${issue.message}${got}`, param === "" ? null : param, issue.code);
}

/**
 * Maps anything a route threw to an ApiError: engine capacity 400s, a dead worker 503 (code
 * worker_died, saying why), else 500.
 * (Bad arguments are caught as 400s where the server validates them, so a stray TypeError here is
 * our bug and stays a 500.)
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof CapacityError) return badRequest(err.message, null, "capacity_exceeded");
  if (err instanceof AbortedError) {
    return new ApiError(499, err.message, "invalid_request_error", null, "request_aborted");
  }
  if (err instanceof WorkerDiedError) {
    const rank = err.rank >= 0 ? ` (rank ${err.rank})` : "";
    return new ApiError(
      503,
      `The worker serving this request died${rank} before it finished; retry it: ${err.message}`,
      "server_error",
      null,
      "worker_died",
      { cause: err },
    );
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError(500, `Internal server error: ${message}`, "server_error", null, "internal_error", { cause: err });
}
