// Connections over a real Unix socket pair: round trips, correlation, timeouts, malformed frames,
// heartbeat death detection.
import { afterEach, expect, test } from "bun:test";
import { Connection, type ConnectionOptions } from "../../../lib/protocol/connection.ts";
import { encodeFrame } from "../../../lib/protocol/frame_codec.ts";
import { encodeUnchecked } from "../../../lib/protocol/message_codec.ts";
import type { Message } from "../../../lib/protocol/messages.ts";
import {
  ConnectionClosedError,
  type ProtocolError,
  RemoteError,
  RequestTimeoutError,
} from "../../../lib/protocol/protocol_errors.ts";
import {
  type ByteStream,
  connectUnix,
  listenUnix,
  tempSocketPath,
  type UnixServer,
} from "../../../lib/runtime/unix_socket.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function streamPair(): Promise<[ByteStream, ByteStream, UnixServer]> {
  let accept!: (s: ByteStream) => void;
  const accepted = new Promise<ByteStream>((r) => (accept = r));
  const server = await listenUnix(tempSocketPath("t"), (s) => accept(s));
  const client = await connectUnix(server.path);
  const srv = await accepted;
  cleanups.push(() => server.close());
  return [client, srv, server];
}

const quiet = { log: () => {} };
async function connectionPair(a: Partial<ConnectionOptions> = {}, b: Partial<ConnectionOptions> = {}) {
  const [s1, s2] = await streamPair();
  const left = new Connection(s1, { name: "left", heartbeat: false, ...quiet, ...a });
  const right = new Connection(s2, { name: "right", heartbeat: false, ...quiet, ...b });
  cleanups.push(() => {
    left.close();
    right.close();
  });
  return { left, right, s1, s2 };
}

function nextMessage(c: Connection): Promise<Message> {
  return new Promise((r) => c.onMessage((m) => r(m)));
}

test("one-way messages arrive intact, in order", async () => {
  const { left, right } = await connectionPair();
  const got: Message[] = [];
  const done = new Promise<void>((r) =>
    right.onMessage((m) => {
      got.push(m);
      if (got.length === 50) r();
    })
  );
  for (let i = 0; i < 50; i++) {
    left.send({ type: "token_delta", items: [{ requestId: `r${i}`, tokenIds: [i, i + 1], text: "" }] });
  }
  await done;
  expect(got.map((m) => (m.type === "token_delta" ? m.items[0]!.requestId : ""))).toEqual(
    Array.from({ length: 50 }, (_, i) => `r${i}`),
  );
});

test("requests are correlated with their replies even when answered out of order", async () => {
  const { left, right } = await connectionPair();
  const held: Message[] = [];
  right.onMessage((m) => {
    held.push(m);
    if (held.length === 3) {
      for (const q of held.reverse()) {
        if (q.type !== "route_query") continue;
        right.reply(q, {
          type: "route_result",
          requestId: q.requestId,
          rank: q.promptTokens,
          reason: "test",
          matchedBlocks: 0,
          feasible: true,
        });
      }
    }
  });
  const ask = (n: number) =>
    left.request({ type: "route_query", requestId: `q${n}`, blockHashes: [], promptTokens: n, maxTokens: 1 }, {
      expect: ["route_result"],
    });
  const [a, b, c] = await Promise.all([ask(1), ask(2), ask(3)]);
  expect([a.requestId, a.rank, b.requestId, b.rank, c.requestId, c.rank]).toEqual(["q1", 1, "q2", 2, "q3", 3]);
});

test("an unanswered request times out with RequestTimeoutError naming it; a late reply is dropped", async () => {
  const { left, right } = await connectionPair();
  let pendingQuery: Message | undefined;
  right.onMessage((m) => (pendingQuery = m));
  const err = await left.request({ type: "stats_request" }, { timeoutMs: 50 }).catch((e) => e);
  expect(err).toBeInstanceOf(RequestTimeoutError);
  expect((err as Error).message).toContain("stats_request");
  right.reply(pendingQuery!, { type: "stats", counters: {} });
  // The connection still works after the late reply.
  const next = nextMessage(left);
  right.send({ type: "shutdown", reason: "after" });
  expect(await next).toEqual({ type: "shutdown", reason: "after" });
  expect(left.counters.lateReplies).toBe(1);
});

test("an error reply rejects the request with RemoteError carrying code and field", async () => {
  const { left, right } = await connectionPair();
  right.onMessage((m) => right.replyError(m, "capacity", "no room", "promptTokens"));
  const err = await left.request({
    type: "route_query",
    requestId: "x",
    blockHashes: [],
    promptTokens: 1,
    maxTokens: 1,
  }).catch((e) => e);
  expect(err).toBeInstanceOf(RemoteError);
  expect((err as RemoteError).code).toBe("capacity");
  expect((err as RemoteError).details.field).toBe("promptTokens");
});

test("malformed frames are rejected with an error naming type/field, and the connection keeps working", async () => {
  const { left, right, s1 } = await connectionPair();
  const rejected: ProtocolError[] = [];
  right.onProtocolError((e) => rejected.push(e));
  const errorsBack: Message[] = [];
  const received: Message[] = [];
  right.onMessage((m) => received.push(m));
  left.onMessage((m) => errorsBack.push(m));
  // A schema mismatch in a request (its id comes back as replyTo), an unknown type, undecodable
  // bytes, garbage, and a huge length, then a good message.
  s1.write(
    encodeUnchecked({
      type: "route_query",
      id: 99,
      requestId: "r",
      blockHashes: "nope",
      promptTokens: 1,
      maxTokens: 1,
    }),
  );
  s1.write(encodeUnchecked({ type: "warp", x: 1 }));
  s1.write(encodeFrame(new Uint8Array([0x92, 0x01])));
  s1.write(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9]));
  const huge = encodeFrame(new Uint8Array([1]));
  new DataView(huge.buffer).setUint32(4, 0xffffffff, false);
  s1.write(huge);
  const good = new Promise<void>((r) => right.onMessage((m) => (received.push(m), r())));
  left.send({ type: "abort", requestId: "still-works" });
  await good;
  expect(received).toEqual([{ type: "abort", requestId: "still-works" }]);
  expect(rejected.map((e) => e.code)).toEqual(["schema", "unknown_type", "undecodable", "bad_magic", "bad_length"]);
  expect(rejected[0]!.message).toContain('invalid route_query message: field "blockHashes"');
  await new Promise((r) => setTimeout(r, 30));
  const first = errorsBack[0];
  expect(first?.type).toBe("error");
  if (first?.type === "error") {
    expect(first.replyTo).toBe(99);
    expect(first.messageType).toBe("route_query");
    expect(first.field).toBe("blockHashes");
  }
  expect(errorsBack.length).toBe(5);
});

test("a handler that throws answers the request with an internal error and keeps serving", async () => {
  const { left, right } = await connectionPair();
  let calls = 0;
  right.onMessage((m) => {
    if (calls++ === 0) throw new Error("boom");
    right.reply(m, { type: "stats", counters: { calls } });
  });
  const e = await left.request({ type: "stats_request" }).catch((x) => x);
  expect((e as RemoteError).code).toBe("internal");
  expect((e as Error).message).toContain("boom");
  const ok = await left.request({ type: "stats_request" }, { expect: ["stats"] });
  expect(ok.counters.calls).toBe(2);
});

test("heartbeats flow both ways and keep a quiet but live peer alive", async () => {
  const hb = { intervalMs: 20, missLimit: 3 };
  let dead = false;
  const { left, right } = await connectionPair({ heartbeat: hb }, { heartbeat: hb });
  left.onClose((i) => (dead ||= i.dead));
  right.onClose((i) => (dead ||= i.dead));
  await new Promise((r) => setTimeout(r, 200));
  expect(dead).toBe(false);
  expect(left.counters.heartbeatsReceived).toBeGreaterThan(3);
  expect(right.counters.heartbeatsReceived).toBeGreaterThan(3);
});

test("a peer that stops sending is declared dead after missLimit heartbeats; pending requests fail", async () => {
  const [s1] = await streamPair(); // the other end never writes anything
  const conn = new Connection(s1, { name: "watcher", heartbeat: { intervalMs: 20, missLimit: 3 }, ...quiet });
  const t0 = Date.now();
  const closed = new Promise<{ reason: string; dead: boolean; at: number }>((r) =>
    conn.onClose((i) => r({ ...i, at: Date.now() }))
  );
  const pending = conn.request({ type: "stats_request" }, { timeoutMs: 5000 }).catch((e) => e);
  const info = await closed;
  expect(info.dead).toBe(true);
  expect(info.reason).toContain("silent");
  expect(info.at - t0).toBeGreaterThanOrEqual(60);
  expect(info.at - t0).toBeLessThan(1000);
  expect(await pending).toBeInstanceOf(ConnectionClosedError);
  expect(conn.send({ type: "shutdown" })).toBe(false);
});

test("closing one side closes the other and fails its pending requests", async () => {
  const { left, right } = await connectionPair();
  right.onMessage(() => {});
  const pending = left.request({ type: "stats_request" }, { timeoutMs: 5000 }).catch((e) => e);
  const closed = new Promise<string>((r) => left.onClose((i) => r(i.reason)));
  right.close("bye");
  expect(await closed).toBe("closed by peer");
  expect(await pending).toBeInstanceOf(ConnectionClosedError);
});
