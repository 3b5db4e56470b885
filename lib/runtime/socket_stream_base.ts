/**
 * What the two {@link ByteStream} implementations (node:net, Bun's sockets) share: incoming chunks
 * and the one close delivered to handlers the stream's user may set only later (a chunk that comes
 * first is kept, a close that came first is reported when the handler is set), and a close that
 * ends gracefully but at most CLOSE_FLUSH_MS later, so a peer that never reads cannot keep it open.
 * @module
 */
import type { ByteStream } from "./byte_stream.ts";

/** How long a closing stream waits for its peer to take what is still queued. */
const CLOSE_FLUSH_MS = 1000;

/** The shared half of a socket {@link ByteStream}; subclasses write, end and destroy. */
export abstract class SocketStreamBase implements ByteStream {
  #dataHandler: ((chunk: Uint8Array) => void) | undefined;
  #pending: Uint8Array[] = [];
  #closeHandler: ((error?: Error) => void) | undefined;
  #ended = false;
  #endError: Error | undefined;
  /** Set by close() and destroy(): nothing more is written. */
  protected closing = false;

  abstract write(bytes: Uint8Array): boolean;
  abstract destroy(): void;
  /** Starts the graceful end (once, from close()). */
  protected abstract endGracefully(): void;

  get closed(): boolean {
    return this.closing || this.#ended;
  }

  /** True once the transport reported the close. */
  protected get ended(): boolean {
    return this.#ended;
  }

  onData(handler: (chunk: Uint8Array) => void): void {
    this.#dataHandler = handler;
    const queued = this.#pending;
    this.#pending = [];
    for (const c of queued) handler(c);
  }

  onClose(handler: (error?: Error) => void): void {
    if (this.#ended) {
      queueMicrotask(() => handler(this.#endError));
      return;
    }
    this.#closeHandler = handler;
  }

  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.endGracefully();
    const t = setTimeout(() => this.destroy(), CLOSE_FLUSH_MS);
    (t as { unref?: () => void }).unref?.();
  }

  /** A chunk arrived (kept as a copy until a handler is set: the transport may reuse its buffer). */
  protected received(chunk: Uint8Array): void {
    if (this.#dataHandler) this.#dataHandler(chunk);
    else this.#pending.push(chunk.slice());
  }

  /** The transport closed (with `error` when it failed); reported once. */
  protected reportEnd(error?: Error): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#endError = error;
    const h = this.#closeHandler;
    this.#closeHandler = undefined;
    h?.(error);
  }
}
