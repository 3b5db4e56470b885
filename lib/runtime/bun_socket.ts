/**
 * {@link ByteStream}s over Bun's own Unix sockets (Bun.listen / Bun.connect), used under Bun in
 * place of node:net. Bun's node:net hands a write to the kernel only on a later turn of the event
 * loop, so a message written right after another reaches even an awake reader late, in a separate
 * read. A Bun socket writes with one sendto(2) at once; what the
 * kernel does not take (backpressure) is copied into a queue and written, in order, on drain.
 * @module
 */
import { SocketStreamBase } from "./socket_stream_base.ts";
import type { ByteStream, UnixServer } from "./byte_stream.ts";

/** The part of Bun's socket this module uses. */
interface BunSocket {
  data: BunByteStream | undefined;
  write(data: Uint8Array): number;
  /** Sends FIN; still reads. (Bun's end() closes at once, resetting a peer whose bytes it has not read.) */
  shutdown(): void;
  end(): void;
  terminate(): void;
}

interface BunSocketHandlers {
  open(socket: BunSocket): void;
  data(socket: BunSocket, chunk: Uint8Array): void;
  drain(socket: BunSocket): void;
  end(socket: BunSocket): void;
  error(socket: BunSocket, error: Error): void;
  close(socket: BunSocket, error?: Error): void;
}

interface BunSockets {
  listen(options: { unix: string; socket: BunSocketHandlers }): { stop(closeActiveConnections?: boolean): void };
  connect(options: { unix: string; socket: BunSocketHandlers }): Promise<BunSocket>;
}

/** Bun's socket API, or undefined outside Bun. */
export function bunSockets(): BunSockets | undefined {
  const bun = (globalThis as { Bun?: Partial<BunSockets> }).Bun;
  return typeof bun?.listen === "function" && typeof bun.connect === "function" ? (bun as BunSockets) : undefined;
}

class BunByteStream extends SocketStreamBase {
  #queue: Uint8Array[] = [];
  #closeError: Error | undefined;
  #peerEnded = false;
  #finished = false;

  constructor(private readonly socket: BunSocket) {
    super();
  }

  write(bytes: Uint8Array): boolean {
    if (this.closed) return false;
    if (this.#queue.length > 0) {
      this.#queue.push(bytes.slice());
      return true;
    }
    const n = this.socket.write(bytes);
    if (n < 0) return false;
    // The caller may reuse its buffer once write returns: keep a copy of what is left.
    if (n < bytes.length) this.#queue.push(bytes.slice(n));
    return true;
  }

  protected endGracefully(): void {
    if (this.#queue.length === 0) this.#finish();
  }

  destroy(): void {
    this.closing = true;
    this.#queue = [];
    if (!this.ended) this.socket.terminate();
  }

  /** Ends this side once its queue is written: FIN while the peer may still send, else close. */
  #finish(): void {
    if (this.#finished || this.ended) return;
    this.#finished = true;
    if (this.#peerEnded) this.socket.end();
    else this.socket.shutdown();
  }

  // ---- Bun's callbacks --------------------------------------------------------------------------

  onChunk(chunk: Uint8Array): void {
    this.received(chunk);
  }

  onDrain(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      const n = this.socket.write(head);
      if (n < 0) return;
      if (n < head.length) {
        this.#queue[0] = head.subarray(n);
        return;
      }
      this.#queue.shift();
    }
    if (this.closing) this.#finish();
  }

  onError(error: Error): void {
    // A reset after the peer's end (or ours) is how an end with unread bytes finishes, not a failure.
    if (this.#peerEnded || this.closing) return;
    this.#closeError ??= error;
  }

  onPeerEnd(): void {
    // No half-open streams: the peer's end closes this side too, once the queue is written.
    this.#peerEnded = true;
    this.closing = true;
    if (this.#queue.length === 0) this.#finish();
  }

  onSocketClose(error?: Error): void {
    this.#queue = [];
    if (error) this.onError(error);
    this.reportEnd(this.#closeError);
  }
}

/** Bun's callbacks for sockets whose streams `onOpen` gets; `onGone` hears when one closed. */
function handlers(
  onOpen: (stream: BunByteStream) => void,
  onGone?: (stream: BunByteStream) => void,
): BunSocketHandlers {
  return {
    open(socket) {
      const stream = new BunByteStream(socket);
      socket.data = stream;
      onOpen(stream);
    },
    data: (socket, chunk) => socket.data?.onChunk(chunk),
    drain: (socket) => socket.data?.onDrain(),
    end: (socket) => socket.data?.onPeerEnd(),
    error: (socket, error) => socket.data?.onError(error),
    close: (socket, error) => {
      const stream = socket.data;
      if (!stream) return;
      stream.onSocketClose(error);
      onGone?.(stream);
    },
  };
}

/** Listens on `path` with Bun's sockets (the caller removed a stale socket file). */
export function listenBun(
  bun: BunSockets,
  path: string,
  onConnection: (stream: ByteStream) => void,
  onClosed: () => void,
): UnixServer {
  const accepted = new Set<BunByteStream>();
  let listener: { stop(closeActiveConnections?: boolean): void };
  try {
    listener = bun.listen({
      unix: path,
      socket: handlers(
        (stream) => {
          accepted.add(stream);
          onConnection(stream);
        },
        (stream) => accepted.delete(stream),
      ),
    });
  } catch (e) {
    throw new Error(`cannot listen on unix socket ${path}: ${(e as Error).message}`, { cause: e });
  }
  return {
    path,
    close: () => {
      for (const s of accepted) s.destroy();
      listener.stop(true);
      onClosed();
      return Promise.resolve();
    },
  };
}

/** One connection attempt to `path` with Bun's sockets. */
export async function connectBun(bun: BunSockets, path: string): Promise<ByteStream> {
  let stream: BunByteStream | undefined;
  const socket = await bun.connect({ unix: path, socket: handlers((s) => (stream = s)) });
  return stream ?? (socket.data as BunByteStream);
}
