/**
 * Server lifecycle: counts in-flight requests, gives each an abort scope tied to its client, and
 * drains on SIGTERM/SIGINT (new requests get 503, in-flight ones finish, then the process exits 0).
 * @module
 */
import { exitProcess, onTerminationSignal } from "../runtime/subprocess.ts";

/** One request's scope: aborted when its client goes away; closed when its response is complete. */
export class RequestScope {
  private readonly controller = new AbortController();
  private closed = false;
  /** Set by routes whose response body outlives the handler (SSE); they close the scope themselves. */
  streaming = false;

  constructor(
    private readonly onClose: () => void,
    clientSignal?: AbortSignal,
  ) {
    if (clientSignal) {
      if (clientSignal.aborted) this.controller.abort(clientSignal.reason);
      else clientSignal.addEventListener("abort", () => this.abort(clientSignal.reason), { once: true });
    }
  }

  /** Aborted when the client disconnects (or the response stream is cancelled). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Aborts the engine requests of this scope (idempotent; a no-op once closed). */
  abort(reason?: unknown): void {
    if (!this.closed && !this.controller.signal.aborted) this.controller.abort(reason ?? new Error("client disconnected"));
  }

  /** Marks the request done (idempotent). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

/** In-flight accounting and the draining state of one server. */
export class ServerLifecycle {
  private inFlightCount = 0;
  private isDraining = false;
  private idleWaiters: Array<() => void> = [];

  /** True once drain() was called: new requests are refused with 503. */
  get draining(): boolean {
    return this.isDraining;
  }

  /** Requests whose responses are not yet complete. */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /** Opens the scope of one request. */
  open(clientSignal?: AbortSignal): RequestScope {
    this.inFlightCount++;
    return new RequestScope(() => {
      this.inFlightCount--;
      if (this.inFlightCount === 0) for (const w of this.idleWaiters.splice(0)) w();
    }, clientSignal);
  }

  /** Starts draining; resolves once no request is in flight. */
  drain(): Promise<void> {
    this.isDraining = true;
    if (this.inFlightCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
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
