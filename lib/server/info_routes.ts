/**
 * Read-only routes: GET /v1/models (and /v1/models/{id}), /health, /version and /metrics.
 * @module
 */
import type { ServerContext } from "./context.ts";
import { errorResponse, notFound, unavailable } from "./errors.ts";
import { LMPOOL_VERSION } from "./version.ts";

/** The served model's card, in OpenAI's shape plus vLLM's root, parent and max_model_len. */
function modelCard(ctx: ServerContext) {
  return {
    id: ctx.modelName,
    object: "model",
    created: ctx.startedAt,
    owned_by: "lmpool",
    root: ctx.engine.model.name,
    parent: null,
    max_model_len: ctx.engine.model.maxModelLen,
  };
}

/** GET /v1/models: the one served model, in OpenAI's list shape. */
export function handleModels(_req: Request, ctx: ServerContext): Response {
  return Response.json({ object: "list", data: [modelCard(ctx)] });
}

/** GET /v1/models/{id}: the served model's card, or a 404 naming the id. */
export function handleModel(req: Request, ctx: ServerContext): Response {
  const path = new URL(req.url).pathname.replace(/\/$/, "");
  const id = decodeURIComponent(path.slice("/v1/models/".length));
  if (id !== ctx.modelName) {
    return errorResponse(
      notFound(`The model \`${id}\` does not exist. This server serves \`${ctx.modelName}\`.`, "model"),
    );
  }
  return Response.json(modelCard(ctx));
}

/**
 * GET /health: 200 with an empty body while at least one rank serves (fewer than all is reduced
 * capacity, not down); 503 once none does or the server drains.
 */
export function handleHealth(_req: Request, ctx: ServerContext): Response {
  if (ctx.lifecycle.draining) return errorResponse(unavailable("The server is shutting down"));
  if (!ctx.engine.healthy) return errorResponse(unavailable("No worker rank is serving"));
  return new Response(null, { status: 200 });
}

/** GET /version. */
export function handleVersion(): Response {
  return Response.json({ version: LMPOOL_VERSION });
}

/** GET /metrics: Prometheus text exposition. */
export function handleMetrics(_req: Request, ctx: ServerContext): Response {
  // This scrape is itself in flight; it is not a request being served.
  const stats = ctx.engine.stats();
  const text = ctx.metrics.render(stats, Math.max(0, ctx.lifecycle.inFlight - 1));
  return new Response(text, { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
}
