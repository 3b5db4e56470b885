/**
 * Server lifecycle: counts in-flight requests, gives each an abort scope tied to its client (and to
 * the server's own deadlines), and drains on SIGTERM/SIGINT (new requests get 503, in-flight ones
 * finish or are failed at the drain deadline, then the process exits 0).
 * @module
 */
import { exitProcess, onTerminationSignal } from "../runtime/subprocess.ts";
import type { ApiError } from "./errors.ts";

/** How long a shutdown waits for in-flight requests before ending them (--drain-timeout), in seconds. */
export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 30;

/**
 * One request's scope: aborted when its client goes away; failed by the server (request timeout,
 * shutdown), which also aborts it; closed when its response is complete.
 */
export class RequestScope {
  private readonly controller = new AbortController();
  private closed = false;
  private failedWith: ApiError | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly failedPromise: Promise<ApiError>;
  private resolveFailed!: (err: ApiError) => void;
  /** Set by routes whose response body outlives the handler (SSE); they close the scope themselves. */
  streaming = false;

  constructor(
    private readonly onClose: () => void,
    clientSignal?: AbortSignal,
  ) {
    this.failedPromise = new Promise((resolve) => (this.resolveFailed = resolve));
    if (clientSignal) {
      if (clientSignal.aborted) this.controller.abort(clientSignal.reason);
      else clientSignal.addEventListener("abort", () => this.abort(clientSignal.reason), { once: true });
    }
  }

  /** Aborted when the client disconnects, the response stream is cancelled, or the server fails the request. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The server's reason for ending this request early (timeout, shutdown), if it did. */
  get failure(): ApiError | undefined {
    return this.failedWith;
  }

  /** Resolves with the server's reason once it fails the request (never, if it does not). */
  get failed(): Promise<ApiError> {
    return this.failedPromise;
  }

  /** Aborts the engine requests of this scope (idempotent; a no-op once closed). */
  abort(reason?: unknown): void {
    if (!this.closed && !this.controller.signal.aborted) {
      this.controller.abort(reason ?? new Error("client disconnected"));
    }
  }

  /**
   * Ends the request on the server's side: its engine requests are aborted and the client gets
   * `err` (as the response, or as the stream's error event). The first failure wins.
   */
  fail(err: ApiError): void {
    if (this.closed || this.failedWith) return;
    this.failedWith = err;
    this.abort(err);
    this.resolveFailed(err);
  }

  /** Fails the request with `err()` after `ms` unless it completes first. */
  failAfter(ms: number, err: () => ApiError): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fail(err()), ms);
  }

  /** Marks the request done (idempotent). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.onClose();
  }
}

/** In-flight accounting and the draining state of one server. */
export class ServerLifecycle {
  private readonly scopes = new Set<RequestScope>();
  private isDraining = false;
  private idleWaiters: Array<() => void> = [];

  /** True once drain() was called: new requests are refused with 503. */
  get draining(): boolean {
    return this.isDraining;
  }

  /** Requests whose responses are not yet complete. */
  get inFlight(): number {
    return this.scopes.size;
  }

  /** Opens the scope of one request. */
  open(clientSignal?: AbortSignal): RequestScope {
    const scope: RequestScope = new RequestScope(() => {
      this.scopes.delete(scope);
      if (this.scopes.size === 0) { for (const w of this.idleWaiters.splice(0)) w(); }
    }, clientSignal);
    this.scopes.add(scope);
    return scope;
  }

  /** Starts draining; resolves once no request is in flight. */
  drain(): Promise<void> {
    this.isDraining = true;
    return this.idle();
  }

  /** Resolves once no request is in flight. */
  idle(): Promise<void> {
    if (this.scopes.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Fails every request still in flight with `err` (see RequestScope.fail). */
  failAll(err: ApiError): void {
    for (const scope of [...this.scopes]) scope.fail(err);
  }
}

/**
 * Runs `shutdown` once on the first SIGTERM or SIGINT; a second signal exits at once with 130
 * (the user insisted).
 */
export function shutdownOnSignal(shutdown: (signal: string) => Promise<void>): void {
  let started = false;
  onTerminationSignal((signal) => {
    if (started) exitProcess(130);
    started = true;
    void shutdown(signal);
  });
}
