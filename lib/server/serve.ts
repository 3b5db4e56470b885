/**
 * Starts the OpenAI-compatible server around an engine and shuts it down gracefully: drain (503
 * for new requests, in-flight ones finish, those still running at the drain deadline are ended),
 * stop listening, shut the engine down. `listen()` binds the port before there is an engine, so a
 * taken port is found before a model loads; until `serve()` swaps the app in, every route answers
 * 503 (code "loading").
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { type HttpServer, startHttpServer } from "../runtime/http_server.ts";
import { createApp, type ServerApp } from "./app.ts";
import { errorResponse, unavailable } from "./errors.ts";
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from "./lifecycle.ts";
import { inlinePromptTokenizer, pooledPromptTokenizer, type PromptTokenizer } from "./prompt_tokenizer.ts";
import type { ReplyParserSettings } from "./reply_parsing.ts";
import { DEFAULT_MAX_REQUEST_BYTES } from "./request_body.ts";
import { TokenizerPool } from "./tokenizer_pool.ts";

/** Where to listen. */
export interface ListenOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8000; 0 picks a free port. */
  port?: number;
  /** Largest request body in bytes (default 4 MiB); the listener refuses well past it on its own. */
  maxRequestBytes?: number;
}

/** What the app needs once the engine is up. */
export interface AppServeOptions {
  engine: GenerationEngine;
  apiKey?: string;
  servedModelName?: string;
  /** Chat max_tokens when a request sets none (default: the rest of the context). */
  defaultChatMaxTokens?: number;
  /** Time limit of every request in seconds (default none); clients may shorten theirs (x-request-timeout). */
  requestTimeoutSeconds?: number;
  /** Longest drain on close() before the remaining requests are ended (default 30 s). */
  drainTimeoutSeconds?: number;
  /**
   * The model directory (tokenizer.json ...): large inputs are then tokenized and templated on a
   * pool of threads that load it. Without it, tokenization runs inline on the engine's tokenizer.
   */
  tokenizerDir?: string;
  /** Threads of that pool (default 2). */
  tokenizerThreads?: number;
  /** Jobs waiting for a pool thread before new ones get 503 (default 64). */
  tokenizerQueue?: number;
  /** Longest one tokenization may run on a pool thread (default 30 s). */
  tokenizerJobTimeoutMs?: number;
  /** Reasoning and tool-call parsers of chat replies (default none). */
  replyParsers?: ReplyParserSettings;
}

/** Options of serve(). */
export interface ServeOptions extends ListenOptions, AppServeOptions {}

/** A running server. */
export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly app: ServerApp;
  /** Drains (for at most the drain timeout), stops listening, then shuts the engine down. Idempotent. */
  close(): Promise<void>;
}

/** A bound port that answers 503 until serve() swaps the app in. */
export interface ServerListener {
  readonly url: string;
  readonly port: number;
  /** Builds the app around the engine and serves it on this port. */
  serve(options: AppServeOptions): Promise<RunningServer>;
  /** Stops listening (when start-up fails before serve()). Idempotent. */
  close(): Promise<void>;
}

// The runtime's own body bound. Bun answers a body past it with a bare 413 before the app sees the
// request, so it sits far above the app's limit: the app refuses by Content-Length before reading
// and stops a streamed body at its limit (with an OpenAI error body either way), and never buffers
// more than its limit; only absurd bodies meet the runtime's bare 413.
const RUNTIME_BODY_BOUND = 1024 ** 3;

function loading(): Response {
  return errorResponse(
    unavailable("The server is loading the model; retry shortly", "ModelLoadingError"),
    { "retry-after": "5" },
  );
}

/** Binds the port now and answers every request with 503 "loading" until serve() is called. */
export async function listen(options: ListenOptions = {}): Promise<ServerListener> {
  const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  let handler: (req: Request) => Response | Promise<Response> = loading;
  const http: HttpServer = await startHttpServer({
    hostname: options.host ?? "127.0.0.1",
    port: options.port ?? 8000,
    maxRequestBodySize: Math.max(RUNTIME_BODY_BOUND, 2 * maxRequestBytes),
    fetch: (req) => handler(req),
  });
  return {
    url: http.url,
    port: http.port,
    close: () => http.stop(true),
    async serve(o) {
      const tokenizer = await startTokenizer(o);
      let app: ServerApp;
      try {
        app = createApp({
          engine: o.engine,
          apiKey: o.apiKey,
          servedModelName: o.servedModelName,
          defaultChatMaxTokens: o.defaultChatMaxTokens,
          maxRequestBytes,
          requestTimeoutSeconds: o.requestTimeoutSeconds,
          tokenizer,
          replyParsers: o.replyParsers,
        });
      } catch (e) {
        tokenizer.close();
        throw e;
      }
      const drainSeconds = o.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS;
      if (!(drainSeconds >= 0 && Number.isFinite(drainSeconds))) {
        throw new RangeError(`drainTimeoutSeconds must be a number >= 0, got ${drainSeconds}`);
      }
      handler = app.fetch;
      let closing: Promise<void> | undefined;
      const close = async () => {
        try {
          await app.drain(drainSeconds);
          // Nothing is in flight any more: close idle keep-alive connections too, or stop would wait on them.
          await http.stop(true);
        } finally {
          tokenizer.close();
          await o.engine.shutdown();
        }
      };
      return { url: http.url, port: http.port, app, close: () => (closing ??= close()) };
    },
  };
}

async function startTokenizer(o: AppServeOptions): Promise<PromptTokenizer> {
  if (o.tokenizerDir === undefined) return inlinePromptTokenizer(o.engine.tokenizer);
  const pool = await TokenizerPool.start({
    dir: o.tokenizerDir,
    threads: o.tokenizerThreads,
    maxQueue: o.tokenizerQueue,
    jobTimeoutMs: o.tokenizerJobTimeoutMs,
  });
  return pooledPromptTokenizer(o.engine.tokenizer, pool);
}

/**
 * Serves `engine` over HTTP with the OpenAI API.
 *
 * @example
 * ```ts
 * const llm = await LLM.create({ model: "/models/Qwen3-0.6B" });
 * const server = await serve({ engine: llm, port: 8000, tokenizerDir: "/models/Qwen3-0.6B" });
 * // ... later
 * await server.close();
 * ```
 */
export async function serve(options: ServeOptions): Promise<RunningServer> {
  const listener = await listen(options);
  try {
    return await listener.serve(options);
  } catch (e) {
    await listener.close();
    throw e;
  }
}
