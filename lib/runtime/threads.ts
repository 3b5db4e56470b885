/**
 * Worker threads: a thin wrapper around the Web `Worker` that Bun and Deno both provide, so the rest
 * of the code never touches runtime globals. The parent side starts a thread from a module URL; the
 * thread side answers messages with `serveThread`.
 * @module
 */

/** What a message may move to the other thread instead of copying. */
export type Transferable = ArrayBuffer;

/** A running thread, seen from the thread that started it. */
export interface Thread {
  /** Sends one message (structured clone; `transfer` moves buffers instead of copying them). */
  post(message: unknown, transfer?: Transferable[]): void;
  /** Stops the thread at once, even inside a long computation. Idempotent. */
  terminate(): void;
  /**
   * Whether the thread keeps the process alive (it does from the start); an idle helper thread
   * lets go so that a process with nothing else to do exits. A no-op where the runtime lacks it.
   */
  keepAlive(keep: boolean): void;
}

/** What the parent hears from a thread. */
export interface ThreadHandlers {
  onMessage(message: unknown): void;
  /** The thread threw outside any message handler, or failed to load. */
  onError(error: Error): void;
}

interface WebWorker {
  postMessage(message: unknown, transfer?: Transferable[]): void;
  terminate(): void;
  ref?(): void;
  unref?(): void;
  onmessage: ((e: { data: unknown }) => void) | null;
  onerror: ((e: { message?: string; error?: unknown; preventDefault?: () => void }) => void) | null;
}

type WorkerConstructor = new (url: string | URL, options?: { type?: "module" }) => WebWorker;

/** Starts the module at `url` on a new thread; it keeps the process alive until terminate(). */
export function startThread(url: URL, handlers: ThreadHandlers): Thread {
  const Ctor = (globalThis as unknown as { Worker?: WorkerConstructor }).Worker;
  if (!Ctor) throw new Error("startThread needs a runtime with Web Workers (Bun or Deno)");
  const worker = new Ctor(url, { type: "module" });
  let terminated = false;
  worker.onmessage = (e) => handlers.onMessage(e.data);
  worker.onerror = (e) => {
    e.preventDefault?.();
    const err = e.error instanceof Error ? e.error : new Error(e.message ?? "thread failed");
    handlers.onError(err);
  };
  return {
    post: (message, transfer) => {
      if (terminated) throw new Error("post() on a terminated thread");
      worker.postMessage(message, transfer ?? []);
    },
    terminate: () => {
      if (terminated) return;
      terminated = true;
      worker.onmessage = null;
      worker.onerror = null;
      worker.terminate();
    },
    keepAlive: (keep) => {
      if (!terminated) keep ? worker.ref?.() : worker.unref?.();
    },
  };
}

/** Thread side: answers each message from the parent with `handle`; `reply` posts back. */
export function serveThread(
  handle: (message: unknown, reply: (message: unknown, transfer?: Transferable[]) => void) => void,
): void {
  const self = globalThis as unknown as {
    onmessage: ((e: { data: unknown }) => void) | null;
    postMessage(message: unknown, transfer?: Transferable[]): void;
  };
  const reply = (message: unknown, transfer?: Transferable[]) => self.postMessage(message, transfer ?? []);
  self.onmessage = (e) => handle(e.data, reply);
}
