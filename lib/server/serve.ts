/**
 * Starts the OpenAI-compatible server around an engine and shuts it down gracefully: drain
 * (503 for new requests, in-flight ones finish), stop listening, shut the engine down.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { startHttpServer } from "../runtime/http_server.ts";
import { createApp, type ServerApp } from "./app.ts";

/** Options of serve(). */
export interface ServeOptions {
  engine: GenerationEngine;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8000; 0 picks a free port. */
  port?: number;
  apiKey?: string;
  servedModelName?: string;
  /** Chat max_tokens when a request sets none (default: the rest of the context). */
  defaultChatMaxTokens?: number;
}

/** A running server. */
export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly app: ServerApp;
  /** Drains, stops listening, then shuts the engine down. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves `engine` over HTTP with the OpenAI API.
 *
 * @example
 * ```ts
 * const llm = await LLM.create({ model: "/models/Qwen3-0.6B" });
 * const server = await serve({ engine: llm, port: 8000 });
 * // ... later
 * await server.close();
 * ```
 */
export async function serve(options: ServeOptions): Promise<RunningServer> {
  const app = createApp({
    engine: options.engine,
    apiKey: options.apiKey,
    servedModelName: options.servedModelName,
    defaultChatMaxTokens: options.defaultChatMaxTokens,
  });
  const http = await startHttpServer({ hostname: options.host ?? "127.0.0.1", port: options.port ?? 8000, fetch: app.fetch });
  let closing: Promise<void> | undefined;
  const close = async () => {
    await app.drain();
    // Nothing is in flight any more: close idle keep-alive connections too, or stop would wait on them.
    await http.stop(true);
    await options.engine.shutdown();
  };
  return { url: http.url, port: http.port, app, close: () => (closing ??= close()) };
}
