/**
 * Unix domain sockets as plain byte streams: Bun's own sockets under Bun (bun_socket.ts says why),
 * node:net elsewhere (Deno). The protocol layer sees only {@link ByteStream}; nothing else in lib/
 * touches sockets.
 * @module
 */
import * as net from "node:net";
import { existsSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { bunSockets, connectBun, listenBun } from "./bun_socket.ts";
import { pid, readSetting } from "./env.ts";
import type { ByteStream, UnixServer } from "./byte_stream.ts";
import { SocketStreamBase } from "./socket_stream_base.ts";

export type { ByteStream, UnixServer } from "./byte_stream.ts";

class SocketByteStream extends SocketStreamBase {
  #closeError: Error | undefined;

  constructor(private readonly socket: net.Socket) {
    super();
    socket.on("data", (chunk: Uint8Array) => this.received(chunk));
    socket.on("error", (e: Error) => {
      this.#closeError = e;
    });
    socket.on("close", () => this.reportEnd(this.#closeError));
  }

  override get closed(): boolean {
    return super.closed || this.socket.destroyed;
  }

  write(bytes: Uint8Array): boolean {
    if (this.closed) return false;
    this.socket.write(bytes);
    return true;
  }

  protected endGracefully(): void {
    this.socket.end();
  }

  destroy(): void {
    this.closing = true;
    this.socket.destroy();
  }
}

/** Listens on a Unix socket path (an existing stale socket file there is replaced). */
export function listenUnix(path: string, onConnection: (stream: ByteStream) => void): Promise<UnixServer> {
  if (existsSync(path)) unlinkSync(path);
  const bun = nativeSockets();
  if (bun) {
    try {
      return Promise.resolve(listenBun(bun, path, onConnection, () => removeSocketFile(path)));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  const accepted = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    accepted.add(socket);
    socket.on("close", () => accepted.delete(socket));
    onConnection(new SocketByteStream(socket));
  });
  return new Promise((resolve, reject) => {
    server.once(
      "error",
      (e: Error) => reject(new Error(`cannot listen on unix socket ${path}: ${e.message}`, { cause: e })),
    );
    server.listen(path, () => {
      resolve({
        path,
        close: () =>
          new Promise<void>((done) => {
            for (const s of accepted) s.destroy();
            server.close(() => {
              removeSocketFile(path);
              done();
            });
          }),
      });
    });
  });
}

/** Connects to a Unix socket, retrying while the listener is not up yet, until `timeoutMs`. */
export async function connectUnix(
  path: string,
  options: { timeoutMs?: number; retryDelayMs?: number } = {},
): Promise<ByteStream> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const retryDelayMs = options.retryDelayMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  let lastError: Error | undefined;
  while (Date.now() <= deadline) {
    try {
      return await connectOnce(path);
    } catch (e) {
      lastError = e as Error;
      await new Promise((r) => setTimeout(r, retryDelayMs));
    }
  }
  throw new Error(
    `cannot connect to unix socket ${path} within ${timeoutMs} ms: ${lastError?.message ?? "timed out"}`,
    { cause: lastError },
  );
}

function removeSocketFile(path: string): void {
  if (!existsSync(path)) return;
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * Bun's own sockets when running under Bun (lib/runtime/bun_socket.ts says why), unless
 * LMPOOL_SOCKETS=node asks for node:net; node:net elsewhere (Deno).
 */
function nativeSockets() {
  return readSetting("LMPOOL_SOCKETS") === "node" ? undefined : bunSockets();
}

function connectOnce(path: string): Promise<ByteStream> {
  const bun = nativeSockets();
  if (bun) return connectBun(bun, path);
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(path);
    const onError = (e: Error) => {
      socket.destroy();
      reject(e);
    };
    socket.once("error", onError);
    socket.once("connect", () => {
      socket.off("error", onError);
      resolve(new SocketByteStream(socket));
    });
  });
}

let socketCounter = 0;

/** A fresh socket path in the temp directory (short: Unix socket paths are limited to ~107 bytes). */
export function tempSocketPath(label: string): string {
  const name = `lmp-${pid()}-${Date.now().toString(36)}-${(socketCounter++).toString(36)}-${label}.sock`;
  const dir = tmpdir();
  const path = `${dir}/${name}`;
  if (path.length > 100) throw new RangeError(`socket path too long for a Unix socket (${path.length} bytes): ${path}`);
  return path;
}
