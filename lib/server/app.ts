/**
 * The OpenAI-compatible application: routes, API key, draining and error mapping around a
 * GenerationEngine, as one `fetch(Request) -> Response` function that any HTTP server can call.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { checkApiKey, requiresApiKey } from "./auth.ts";
import { handleChatCompletions } from "./chat_completions.ts";
import { handleCompletions } from "./completions.ts";
import { unixSeconds, type RouteHandler, type ServerContext } from "./context.ts";
import { errorResponse, methodNotAllowed, notFound, toApiError, unavailable } from "./errors.ts";
import { handleHealth, handleMetrics, handleModels, handleVersion } from "./info_routes.ts";
import { ServerLifecycle } from "./lifecycle.ts";
import { ServerMetrics } from "./metrics.ts";
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
}

/** The application: its fetch handler and the state behind it. */
export interface ServerApp {
  fetch(req: Request): Promise<Response>;
  readonly context: ServerContext;
  /** Refuses new requests with 503 from now on; resolves when in-flight ones are done. */
  drain(): Promise<void>;
}

// Routes that still answer while draining (probes and scrapers watch the shutdown).
const ALWAYS_OPEN = new Set(["/health", "/metrics", "/version"]);
// Routes that need a live engine.
const GENERATION = new Set(["/v1/completions", "/v1/chat/completions"]);

function buildRouter(): Router<RouteHandler> {
  return new Router<RouteHandler>()
    .add("POST", "/v1/completions", handleCompletions)
    .add("POST", "/v1/chat/completions", handleChatCompletions)
    .add("GET", "/v1/models", handleModels)
    .add("GET", "/health", handleHealth)
    .add("GET", "/version", handleVersion)
    .add("GET", "/metrics", handleMetrics)
    .add("POST", "/tokenize", handleTokenize)
    .add("POST", "/detokenize", handleDetokenize);
}

/** Builds the application around an engine. */
export function createApp(options: AppOptions): ServerApp {
  const modelName = options.servedModelName ?? options.engine.model.name;
  const context: ServerContext = {
    engine: options.engine,
    modelName,
    metrics: new ServerMetrics(modelName),
    lifecycle: new ServerLifecycle(),
    startedAt: unixSeconds(),
    defaultChatMaxTokens: options.defaultChatMaxTokens,
  };
  const router = buildRouter();

  async function fetch(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const route = router.match(req.method, path);
    if (route.kind === "not_found") return errorResponse(notFound(`No route for ${req.method} ${path}`));
    if (route.kind === "method_not_allowed") return errorResponse(methodNotAllowed(req.method, path), { allow: route.allow.join(", ") });
    if (requiresApiKey(path)) {
      const denied = checkApiKey(req, options.apiKey);
      if (denied) return errorResponse(denied, { "www-authenticate": "Bearer" });
    }
    if (context.lifecycle.draining && !ALWAYS_OPEN.has(path)) return errorResponse(unavailable("The server is shutting down"));
    if (GENERATION.has(path) && !context.engine.healthy) return errorResponse(unavailable("The engine is not healthy"));
    const scope = context.lifecycle.open(req.signal);
    try {
      return await route.handler(req, context, scope);
    } catch (err) {
      const apiError = toApiError(err);
      if (apiError.status >= 500) console.error(`[lmpool] ${req.method} ${path} failed:`, err);
      return errorResponse(apiError);
    } finally {
      if (!scope.streaming) scope.close();
    }
  }

  return { fetch, context, drain: () => context.lifecycle.drain() };
}
