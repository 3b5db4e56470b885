/**
 * What every route handler gets: the engine, the served model name, metrics, lifecycle, tokenizer
 * and limits, plus the request helpers they share (bounded JSON body parsing, model-name check,
 * session id).
 * @module
 */
import type { z } from "zod";
import type { GenerationEngine } from "../core/engine_api.ts";
import { badRequest, fromZodError, notFound } from "./errors.ts";
import type { RequestScope, ServerLifecycle } from "./lifecycle.ts";
import type { ServerMetrics } from "./metrics.ts";
import type { PromptTokenizer } from "./prompt_tokenizer.ts";
import type { PromptContext } from "./prompts.ts";
import type { ReplyParserSettings } from "./reply_parsing.ts";
import { readBodyText } from "./request_body.ts";

/** Shared state of one running server. */
export interface ServerContext {
  engine: GenerationEngine;
  /** The name clients pass as `model` and see in /v1/models. */
  modelName: string;
  metrics: ServerMetrics;
  lifecycle: ServerLifecycle;
  /** Unix seconds when the server started (the models' `created`). */
  startedAt: number;
  /** Chat max_tokens when the request sets none (default: the rest of the context, as vLLM). */
  defaultChatMaxTokens?: number;
  /** Tokenization for the routes (large inputs off the main thread when a pool runs). */
  tokenizer: PromptTokenizer;
  /** Largest request body in bytes (`--max-request-bytes`). */
  maxRequestBytes: number;
  /** The reasoning and tool-call parsers chat replies go through (`--reasoning-parser`, ...). */
  replyParsers: ReplyParserSettings;
}

/** What tokenizing this request's prompts needs: the server's tokenizer and the model's limits. */
export function promptContext(ctx: ServerContext, scope: RequestScope): PromptContext {
  return {
    tokenizer: ctx.tokenizer,
    vocabSize: ctx.engine.model.vocabSize,
    maxModelLen: ctx.engine.model.maxModelLen,
    signal: scope.signal,
  };
}

/** One route: handles a request within its scope. */
export type RouteHandler = (req: Request, ctx: ServerContext, scope: RequestScope) => Response | Promise<Response>;

/**
 * Reads a JSON body (at most `ctx.maxRequestBytes`, else 413) and validates it; non-JSON and schema
 * violations become 400s naming the field.
 */
export async function parseJsonBody<S extends z.ZodType>(
  req: Request,
  ctx: ServerContext,
  schema: S,
): Promise<z.infer<S>> {
  const text = await readBodyText(req, ctx.maxRequestBytes);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw badRequest(`Request body is not valid JSON: ${why}`);
  }
  const parsed = schema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** Rejects a `model` other than the served one (absent means the served model), as vLLM does: 404. */
export function checkModel(ctx: ServerContext, model: string | null | undefined): void {
  if (model == null || model === ctx.modelName) return;
  throw notFound(
    `The model \`${model}\` does not exist. This server serves \`${ctx.modelName}\`.`,
    "model",
  );
}

/** The session id for affinity routing: the `x-session-id` header, else the `user` field. */
export function sessionIdOf(req: Request, user: string | null | undefined): string | undefined {
  return req.headers.get("x-session-id") ?? user ?? undefined;
}

/** A fresh id with an OpenAI-style prefix (`cmpl-...`, `chatcmpl-...`). */
export function newResponseId(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().replace(/-/g, "")}`;
}

/** The header a client names its request with; the server echoes it and builds the response id from it. */
export const REQUEST_ID_HEADER = "x-request-id";

const REQUEST_ID_PATTERN = /^[\x21-\x7e]{1,256}$/;

/** The request's `X-Request-Id` (undefined when absent); one that is not 1-256 visible ASCII characters is a 400. */
export function clientRequestIdOf(req: Request): string | undefined {
  const id = req.headers.get(REQUEST_ID_HEADER);
  if (id === null) return undefined;
  if (!REQUEST_ID_PATTERN.test(id)) {
    throw badRequest(
      `Invalid X-Request-Id header ${JSON.stringify(id.slice(0, 80))}: it must be 1 to 256 visible ASCII characters`,
      "X-Request-Id",
    );
  }
  return id;
}

/**
 * The response id, as vLLM builds it: the prefix and the client's request id (the `X-Request-Id`
 * header, else the body's `request_id`), or a fresh one.
 */
export function responseIdOf(req: Request, prefix: string, bodyRequestId: string | null | undefined): string {
  const id = clientRequestIdOf(req) ?? bodyRequestId;
  return id == null ? newResponseId(prefix) : `${prefix}-${id}`;
}

/** Unix time in whole seconds (the `created` field). */
export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
