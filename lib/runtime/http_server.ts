/**
 * An HTTP listener around a `fetch(Request) -> Response` handler, on Bun.serve or Deno.serve: the
 * only place that knows which one runs.
 * @module
 */
import { runtimeName } from "./env.ts";

/** Where and how to listen. */
export interface HttpServerOptions {
  hostname: string;
  /** 0 picks a free port. */
  port: number;
  fetch(req: Request): Response | Promise<Response>;
  /**
   * Bodies the runtime itself refuses past this many bytes (Bun: maxRequestBodySize), so memory
   * stays bounded even before the handler reads. Deno has no such setting: there the handler's own
   * limit, which stops reading at its bound, is the only one.
   */
  maxRequestBodySize?: number;
}

/** The port is taken (or not ours to bind); the message names it. */
export class PortInUseError extends Error {
  override readonly name = "PortInUseError";
  constructor(
    readonly hostname: string,
    readonly port: number,
    options?: ErrorOptions,
  ) {
    super(`cannot listen on ${hostname}:${port}: the port is in use`, options);
  }
}

/** A listening server. */
export interface HttpServer {
  readonly hostname: string;
  /** The bound port (the chosen one when 0 was asked). */
  readonly port: number;
  /** `http://host:port`. */
  readonly url: string;
  /** Stops listening; `force` also closes open connections. Idempotent. */
  stop(force?: boolean): Promise<void>;
}

interface BunServe {
  serve(
    options: {
      hostname: string;
      port: number;
      idleTimeout: number;
      maxRequestBodySize?: number;
      fetch: (req: Request) => Response | Promise<Response>;
    },
  ): {
    port?: number;
    stop(closeActiveConnections?: boolean): Promise<void>;
  };
}

interface DenoServer {
  addr: { hostname: string; port: number };
  shutdown(): Promise<void>;
}
interface DenoServe {
  serve(
    options: {
      hostname: string;
      port: number;
      signal?: AbortSignal;
      onListen?: (addr: { hostname: string; port: number }) => void;
    },
    handler: (req: Request) => Response | Promise<Response>,
  ): DenoServer;
}

function urlOf(hostname: string, port: number): string {
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  return `http://${host}:${port}`;
}

function startBun(o: HttpServerOptions): HttpServer {
  const bun = (globalThis as unknown as { Bun: BunServe }).Bun;
  const server = bun.serve({
    hostname: o.hostname,
    port: o.port,
    // 0 disables the idle timeout: a long prefill sends nothing for a while and must not be cut.
    idleTimeout: 0,
    ...(o.maxRequestBodySize !== undefined ? { maxRequestBodySize: o.maxRequestBodySize } : {}),
    fetch: (req) => o.fetch(req),
  });
  const port = server.port ?? o.port;
  let stopped: Promise<void> | undefined;
  return {
    hostname: o.hostname,
    port,
    url: urlOf(o.hostname, port),
    stop: (force = false) => (stopped ??= server.stop(force)),
  };
}

function startDeno(o: HttpServerOptions): HttpServer {
  const deno = (globalThis as unknown as { Deno: DenoServe }).Deno;
  const abort = new AbortController();
  const server = deno.serve(
    { hostname: o.hostname, port: o.port, signal: abort.signal, onListen: () => {} },
    (req) => o.fetch(req),
  );
  let stopped: Promise<void> | undefined;
  return {
    hostname: o.hostname,
    port: server.addr.port,
    url: urlOf(o.hostname, server.addr.port),
    stop: (force = false) => {
      if (force) abort.abort();
      return (stopped ??= server.shutdown());
    },
  };
}

function isAddressInUse(e: unknown): boolean {
  const err = e as { code?: unknown; name?: unknown } | null;
  return err?.code === "EADDRINUSE" || err?.name === "AddrInUse";
}

/** Starts listening; resolves once the port is bound. A taken port throws PortInUseError. */
export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const rt = runtimeName();
  if (rt !== "bun" && rt !== "deno") throw new Error(`startHttpServer needs Bun or Deno; this runtime is ${rt}`);
  try {
    return rt === "bun" ? startBun(options) : startDeno(options);
  } catch (e) {
    if (isAddressInUse(e)) throw new PortInUseError(options.hostname, options.port, { cause: e });
    throw e;
  }
}
