/**
 * What the rest of lib/ sees of a socket: a byte stream and a listening server. Both stream
 * implementations (node:net in unix_socket.ts, Bun's sockets in bun_socket.ts) and their shared
 * base class take the types from here, so the socket modules import each other one way only.
 * @module
 */

/** A bidirectional byte stream (one side of a Unix socket connection). */
export interface ByteStream {
  /** Queues bytes for sending; false once closed (the bytes are dropped). */
  write(bytes: Uint8Array): boolean;
  /** Sets the receiver of incoming chunks (chunk boundaries are arbitrary). */
  onData(handler: (chunk: Uint8Array) => void): void;
  /** Sets the callback run once when the stream closes, from either side. */
  onClose(handler: (error?: Error) => void): void;
  /** Flushes pending writes, then closes. Idempotent. */
  close(): void;
  /** Closes at once, dropping pending writes. Idempotent. */
  destroy(): void;
  readonly closed: boolean;
}

/** A listening Unix socket server. */
export interface UnixServer {
  readonly path: string;
  /** Stops accepting, closes every accepted stream and removes the socket file. */
  close(): Promise<void>;
}
