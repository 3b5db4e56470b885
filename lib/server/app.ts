/**
 * The OpenAI-compatible application: routes, API key, body and time limits, draining and error
 * mapping around a GenerationEngine, as one `fetch(Request) -> Response` function that any HTTP
 * server can call.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { checkApiKey, requiresApiKey } from "./auth.ts";
import { handleChatCompletions } from "./chat_completions.ts";
import { handleCompletions } from "./completions.ts";
import { clientRequestIdOf, REQUEST_ID_HEADER, type RouteHandler, type ServerContext, unixSeconds } from "./context.ts";
import { ApiError, errorResponse, methodNotAllowed, notFound, shutDown, toApiError, unavailable } from "./errors.ts";
import { handleHealth, handleMetrics, handleModel, handleModels, handleVersion } from "./info_routes.ts";
import { type RequestScope, ServerLifecycle } from "./lifecycle.ts";
import { ServerMetrics } from "./metrics.ts";
import { inlinePromptTokenizer, type PromptTokenizer } from "./prompt_tokenizer.ts";
import { checkDeclaredLength, DEFAULT_MAX_REQUEST_BYTES } from "./request_body.ts";
import { MAX_TIMEOUT_SECONDS, parseTimeoutSeconds, requestTimeoutOf } from "./request_timeout.ts";
import type { ReplyParserSettings } from "./reply_parsing.ts";
import { Router } from "./router.ts";
import { handleDetokenize, handleTokenize } from "./tokenize_routes.ts";

/** How to build the application. */
export interface AppOptions {
  engine: GenerationEngine;
  /** The model name clients use (default: the engine's model name). */
  servedModelName?: string;
  /** When set, /v1/* requires `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Chat max_tokens when a request sets none (default: the rest of the context). */
  defaultChatMaxTokens?: number;
  /** Largest request body in bytes (default 4 MiB); larger ones get 413 before they are parsed. */
  maxRequestBytes?: number;
  /** Time limit of every request in seconds (default: none); `x-request-timeout` may shorten it. */
  requestTimeoutSeconds?: number;
  /** Tokenization for the routes (default: the engine's tokenizer, inline). */
  tokenizer?: PromptTokenizer;
  /** Reasoning and tool-call parsers of chat replies (default: none, as `vllm serve` without the flags). */
  replyParsers?: ReplyParserSettings;
}

/** The application: its fetch handler and the state behind it. */
export interface ServerApp {
  fetch(req: Request): Promise<Response>;
  readonly context: ServerContext;
  /**
   * Refuses new requests with 503 from now on; resolves when in-flight ones are done. With
   * `deadlineSeconds`, requests still running then are ended (streams with an error event and
   * [DONE], others with 503) and it resolves once they are, or `graceMs` later at most.
   */
  drain(deadlineSeconds?: number, graceMs?: number): Promise<void>;
}

// Routes that still answer while draining (probes and scrapers watch the shutdown).
const ALWAYS_OPEN = new Set(["/health", "/metrics", "/version"]);
// Routes that need a live engine.
const GENERATION = new Set(["/v1/completions", "/v1/chat/completions"]);
// Routes that read a body: the body limit and the request time limit apply to them.
const WITH_BODY = new Set(["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]);

function buildRouter(): Router<RouteHandler> {
  return new Router<RouteHandler>()
    .add("POST", "/v1/completions", handleCompletions)
    .add("POST", "/v1/chat/completions", handleChatCompletions)
    .add("GET", "/v1/models", handleModels)
    .add("GET", "/v1/models/*", handleModel)
    .add("GET", "/health", handleHealth)
    .add("GET", "/version", handleVersion)
    .add("GET", "/metrics", handleMetrics)
    .add("POST", "/tokenize", handleTokenize)
    .add("POST", "/detokenize", handleDetokenize);
}

function checkOptions(o: AppOptions): void {
  const max = o.maxRequestBytes;
  if (max !== undefined && !(Number.isSafeInteger(max) && max >= 1)) {
    throw new RangeError(`maxRequestBytes must be an integer >= 1, got ${String(max)}`);
  }
  const t = o.requestTimeoutSeconds;
  if (t !== undefined && parseTimeoutSeconds(String(t)) === undefined) {
    throw new RangeError(`requestTimeoutSeconds must be a number in (0, ${MAX_TIMEOUT_SECONDS}], got ${String(t)}`);
  }
}

/**
 * Runs a route within its scope and answers with the server's failure of the request (timeout,
 * shutdown) the moment there is one. A non-streaming scope closes when the handler settles (which
 * may be after a failure answered, while it still waits on the tokenizer or the engine); a stream
 * closes its own, and one returned after a failure answered is cancelled unread.
 */
async function runWithinScope(run: () => Response | Promise<Response>, scope: RequestScope): Promise<Response> {
  type Outcome = { res: Response } | { err: unknown } | { failure: ApiError };
  const settled = Promise.resolve()
    .then(run)
    .then((res): Outcome => ({ res }), (err: unknown): Outcome => ({ err }));
  void settled.then((o) => {
    if (!scope.streaming) scope.close();
    else if ("res" in o && scope.failure) void o.res.body?.cancel().catch(() => {});
  });
  const outcome = await Promise.race([settled, scope.failed.then((failure): Outcome => ({ failure }))]);
  if ("failure" in outcome) return errorResponse(outcome.failure);
  if ("err" in outcome) throw outcome.err;
  return outcome.res;
}

/** Builds the application around an engine. */
export function createApp(options: AppOptions): ServerApp {
  checkOptions(options);
  const modelName = options.servedModelName ?? options.engine.model.name;
  const context: ServerContext = {
    engine: options.engine,
    modelName,
    metrics: new ServerMetrics(modelName, options.engine.model.maxModelLen),
    lifecycle: new ServerLifecycle(),
    startedAt: unixSeconds(),
    defaultChatMaxTokens: options.defaultChatMaxTokens,
    tokenizer: options.tokenizer ?? inlinePromptTokenizer(options.engine.tokenizer),
    maxRequestBytes: options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES,
    replyParsers: options.replyParsers ?? {},
  };
  const router = buildRouter();

  /** Answers `req`, echoing its valid `X-Request-Id` on the response as vLLM does. */
  async function fetch(req: Request): Promise<Response> {
    let requestId: string | undefined;
    try {
      requestId = clientRequestIdOf(req);
    } catch (err) {
      return errorResponse(toApiError(err));
    }
    const res = await answer(req);
    if (requestId !== undefined) res.headers.set(REQUEST_ID_HEADER, requestId);
    return res;
  }

  async function answer(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const route = router.match(req.method, path);
    // The route's own path (the router ignores a trailing slash; so do the sets below).
    const routePath = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
    if (route.kind === "not_found") return errorResponse(notFound(`No route for ${req.method} ${path}`));
    if (route.kind === "method_not_allowed") {
      return errorResponse(methodNotAllowed(req.method, path), { allow: route.allow.join(", ") });
    }
    if (requiresApiKey(path)) {
      const denied = checkApiKey(req, options.apiKey);
      if (denied) return errorResponse(denied, { "www-authenticate": "Bearer" });
    }
    if (context.lifecycle.draining && !ALWAYS_OPEN.has(routePath)) {
      return errorResponse(unavailable("The server is shutting down"));
    }
    if (GENERATION.has(routePath) && !context.engine.healthy) {
      return errorResponse(unavailable("The engine is not healthy"));
    }
    const withBody = WITH_BODY.has(routePath);
    let timeout: ReturnType<typeof requestTimeoutOf>;
    try {
      if (withBody) checkDeclaredLength(req, context.maxRequestBytes);
      timeout = withBody ? requestTimeoutOf(req, options.requestTimeoutSeconds) : undefined;
    } catch (err) {
      return errorResponse(toApiError(err));
    }
    const scope = context.lifecycle.open(req.signal);
    if (timeout) scope.failAfter(timeout.seconds * 1000, timeout.error);
    try {
      return await runWithinScope(() => route.handler(req, context, scope), scope);
    } catch (err) {
      // The client left while its request waited (e.g. queued for the tokenizer): nobody reads this.
      if (req.signal.aborted && !scope.failure) {
        return errorResponse(
          new ApiError(499, "The client closed the request", "RequestAbortedError"),
        );
      }
      const apiError = toApiError(err);
      if (apiError.status >= 500) console.error(`[lmpool] ${req.method} ${path} failed:`, err);
      return errorResponse(apiError);
    }
  }

  async function drain(deadlineSeconds?: number, graceMs = 5000): Promise<void> {
    const idle = context.lifecycle.drain();
    if (deadlineSeconds === undefined) return idle;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<"deadline">((
      resolve,
    ) => (timer = setTimeout(() => resolve("deadline"), deadlineSeconds * 1000)));
    const first = await Promise.race([idle, deadline]);
    clearTimeout(timer);
    if (first !== "deadline") return;
    context.lifecycle.failAll(shutDown(deadlineSeconds));
    // Failed requests end at once unless an engine or a slow client holds them; do not wait for ever.
    let graceTimer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      context.lifecycle.idle(),
      new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(graceTimer);
  }

  return { fetch, context, drain };
}
