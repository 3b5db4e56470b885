// Unix socket byte streams, on both implementations (Bun's own sockets, and node:net as Deno uses
// it, chosen with LMPOOL_SOCKETS=node): bytes written past the kernel's buffer arrive whole and in
// order; a close right after a large write still delivers everything before the peer sees the end;
// a peer's close reaches the other side as a clean close.
import { afterEach, expect, test } from "bun:test";
import {
  type ByteStream,
  connectUnix,
  listenUnix,
  tempSocketPath,
  type UnixServer,
} from "../../../lib/runtime/unix_socket.ts";

const servers: UnixServer[] = [];
afterEach(async () => {
  delete process.env.LMPOOL_SOCKETS;
  for (const s of servers.splice(0)) await s.close();
});

async function pair(): Promise<[ByteStream, ByteStream]> {
  let accept!: (s: ByteStream) => void;
  const accepted = new Promise<ByteStream>((r) => (accept = r));
  const server = await listenUnix(tempSocketPath("us"), (s) => accept(s));
  servers.push(server);
  const client = await connectUnix(server.path);
  return [client, await accepted];
}

/** Collects what arrives until the stream closes. */
function drain(s: ByteStream): Promise<{ bytes: Uint8Array; error?: Error }> {
  const chunks: Uint8Array[] = [];
  s.onData((c) => chunks.push(c.slice()));
  return new Promise((resolve) =>
    s.onClose((error) => {
      const n = chunks.reduce((a, c) => a + c.length, 0);
      const bytes = new Uint8Array(n);
      let at = 0;
      for (const c of chunks) bytes.set(c, (at += c.length) - c.length);
      resolve({ bytes, ...(error ? { error } : {}) });
    })
  );
}

for (const impl of ["bun", "node"] as const) {
  test(`${impl}: large and small writes arrive whole and in order; close flushes before the end`, async () => {
    if (impl === "node") process.env.LMPOOL_SOCKETS = "node";
    const [a, b] = await pair();
    const received = drain(b);
    const big = new Uint8Array(24 << 20).map((_, i) => (i * 7 + 3) & 0xff); // far past the socket buffer
    const expected: Uint8Array[] = [];
    for (let i = 0; i < 3; i++) {
      const small = Uint8Array.of(i, i + 1, i + 2);
      expect(a.write(big.subarray(i, i + (8 << 20)))).toBe(true);
      expect(a.write(small)).toBe(true);
      expected.push(big.subarray(i, i + (8 << 20)), small);
    }
    a.close();
    expect(a.write(Uint8Array.of(9))).toBe(false); // closed: refused, not queued
    const { bytes, error } = await received;
    expect(error).toBeUndefined();
    const want = new Uint8Array(expected.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of expected) want.set(c, (at += c.length) - c.length);
    expect(bytes.length).toBe(want.length);
    expect(Buffer.compare(bytes, want)).toBe(0);
  });

  test(`${impl}: a close with unread bytes on its side still ends the peer cleanly`, async () => {
    if (impl === "node") process.env.LMPOOL_SOCKETS = "node";
    const [a, b] = await pair();
    const closedA = new Promise<Error | undefined>((r) => a.onClose(r));
    b.onData(() => {});
    a.write(new Uint8Array(1000)); // b may not have read it when it closes
    b.close();
    expect(await closedA).toBeUndefined();
    expect(a.closed).toBe(true);
  });
}
