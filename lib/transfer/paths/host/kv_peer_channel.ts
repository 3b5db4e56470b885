/**
 * The CPU backend's worker-to-worker byte channel for packed K/V payloads: every worker listens on
 * its own Unix socket; a sender connects to the receiver's socket (one connection per directed
 * pair, opened on first use) and writes one frame per plan. The receiver keeps a mailbox by plan
 * id, so a payload may arrive before or after the destination asks for it. Payloads never pass
 * through the launcher or the control plane.
 *
 * Small signals of another data path may share the channel ({@link KvPeerChannel.divert}): frames
 * whose plan id ends with a registered suffix go to that path's handler instead of the mailbox.
 *
 * Frame: "LKV1" | u32 source rank | u32 plan-id bytes | u64 payload bytes | plan id | payload
 * (big-endian). The payload is written as is, without a copy into the frame.
 * @module
 */
import { type ByteStream, connectUnix, listenUnix, type UnixServer } from "../../../runtime/unix_socket.ts";

const MAGIC = 0x4c4b5631; // "LKV1"
const HEADER_BYTES = 20;
const MAX_PLAN_ID_BYTES = 1024;

/** A receive ended without a payload (plan cancelled, channel closed). */
export class TransferCancelledError extends Error {
  override readonly name = "TransferCancelledError";
}

/** Options of {@link KvPeerChannel.listen}. */
export interface KvPeerChannelOptions {
  rank: number;
  /** This worker's listening socket. */
  socketPath: string;
  /** Socket path of another rank. */
  peerSocketPath: (rank: number) => string;
  /** Unclaimed payloads are dropped after this long (default 60 s). */
  unclaimedTtlMs?: number;
  log?: (line: string) => void;
}

interface Waiter {
  from: number;
  resolve: (payload: Uint8Array) => void;
  reject: (e: Error) => void;
}

/** Length-prefixed plan payloads between workers over Unix sockets. */
export class KvPeerChannel {
  readonly rank: number;
  readonly #o: KvPeerChannelOptions;
  readonly #server: UnixServer;
  readonly #out = new Map<number, Promise<ByteStream>>();
  readonly #arrived = new Map<string, { from: number; payload: Uint8Array; at: number }>();
  readonly #waiting = new Map<string, Waiter>();
  /** Cancelled plan ids (bounded), so a payload arriving later is dropped. */
  readonly #cancelled = new Set<string>();
  readonly #diverted = new Map<string, (from: number, planId: string, payload: Uint8Array) => void>();
  #closed = false;
  /** Bytes sent and received, for stats. */
  readonly counters = { framesSent: 0, bytesSent: 0, framesReceived: 0, bytesReceived: 0, dropped: 0 };

  private constructor(o: KvPeerChannelOptions, server: UnixServer) {
    this.#o = o;
    this.rank = o.rank;
    this.#server = server;
  }

  /** Starts listening on `options.socketPath`. */
  static async listen(options: KvPeerChannelOptions): Promise<KvPeerChannel> {
    // deno-lint-ignore prefer-const -- assigned once, after the callbacks that read it are made
    let self: KvPeerChannel | undefined;
    const early: ByteStream[] = [];
    const server = await listenUnix(options.socketPath, (s) => (self ? self.#accept(s) : early.push(s)));
    self = new KvPeerChannel(options, server);
    for (const s of early) self.#accept(s);
    return self;
  }

  /** Sends `payload` for `planId` to `peerRank` (one frame). Resolves once handed to the socket. */
  async send(planId: string, peerRank: number, payload: Uint8Array): Promise<void> {
    if (this.#closed) {
      throw new TransferCancelledError(`kv channel of rank ${this.rank} is closed; cannot send plan ${planId}`);
    }
    const id = new TextEncoder().encode(planId);
    if (id.length === 0 || id.length > MAX_PLAN_ID_BYTES) {
      throw new RangeError(`plan id must be 1..${MAX_PLAN_ID_BYTES} bytes, got ${id.length}`);
    }
    const header = new Uint8Array(HEADER_BYTES + id.length);
    const dv = new DataView(header.buffer);
    dv.setUint32(0, MAGIC);
    dv.setUint32(4, this.rank);
    dv.setUint32(8, id.length);
    dv.setBigUint64(12, BigInt(payload.byteLength));
    header.set(id, HEADER_BYTES);
    const stream = await this.#connection(peerRank);
    // A small frame (a signal) leaves in one write, so the peer reads it whole at one wake-up.
    const sent = payload.byteLength <= SMALL_FRAME_BYTES
      ? stream.write(joined(header, payload))
      : stream.write(header) && stream.write(payload);
    if (!sent) {
      this.#out.delete(peerRank);
      throw new TransferCancelledError(`kv channel ${this.rank}->${peerRank} closed while sending plan ${planId}`);
    }
    this.counters.framesSent++;
    this.counters.bytesSent += payload.byteLength;
  }

  /** Resolves with `planId`'s payload from `fromRank` (already arrived or when it arrives). */
  receive(planId: string, fromRank: number): Promise<Uint8Array> {
    if (this.#closed) return Promise.reject(new TransferCancelledError(`kv channel of rank ${this.rank} is closed`));
    if (this.#cancelled.has(planId)) return Promise.reject(new TransferCancelledError(`plan ${planId} was cancelled`));
    if (this.#waiting.has(planId)) return Promise.reject(new RangeError(`plan ${planId} is already being received`));
    const got = this.#arrived.get(planId);
    if (got) {
      this.#arrived.delete(planId);
      if (got.from !== fromRank) {
        return Promise.reject(
          new RangeError(`plan ${planId}: payload came from rank ${got.from}, expected rank ${fromRank}`),
        );
      }
      return Promise.resolve(got.payload);
    }
    return new Promise((resolve, reject) => this.#waiting.set(planId, { from: fromRank, resolve, reject }));
  }

  /**
   * Hands every frame whose plan id ends with `suffix` to `handler` (as it arrives, never
   * buffered, never cancelled) instead of the mailbox. One handler per suffix.
   */
  divert(suffix: string, handler: (from: number, planId: string, payload: Uint8Array) => void): void {
    if (suffix.length === 0) throw new RangeError("divert needs a non-empty plan id suffix");
    if (this.#diverted.has(suffix)) {
      throw new RangeError(`plan id suffix ${JSON.stringify(suffix)} is already diverted`);
    }
    this.#diverted.set(suffix, handler);
  }

  /** Abandons a plan: its pending receive rejects, its buffered or late payload is dropped. */
  cancel(planId: string, reason: string): void {
    this.#cancelled.add(planId);
    if (this.#cancelled.size > 4096) this.#cancelled.delete(this.#cancelled.values().next().value!);
    this.#arrived.delete(planId);
    const w = this.#waiting.get(planId);
    if (w) {
      this.#waiting.delete(planId);
      w.reject(new TransferCancelledError(`plan ${planId} cancelled: ${reason}`));
    }
  }

  /** Closes the listener and every connection; pending receives reject. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const [id, w] of this.#waiting) {
      w.reject(new TransferCancelledError(`kv channel of rank ${this.rank} closed while receiving plan ${id}`));
    }
    this.#waiting.clear();
    this.#arrived.clear();
    for (const c of this.#out.values()) void c.then((s) => s.close(), () => {});
    this.#out.clear();
    await this.#server.close();
  }

  #connection(peer: number): Promise<ByteStream> {
    let c = this.#out.get(peer);
    if (!c) {
      c = connectUnix(this.#o.peerSocketPath(peer), { timeoutMs: 5000 });
      this.#out.set(peer, c);
      c.then(
        (s) => s.onClose(() => this.#out.get(peer) === c && this.#out.delete(peer)),
        () => this.#out.get(peer) === c && this.#out.delete(peer),
      );
    }
    return c;
  }

  #accept(stream: ByteStream): void {
    const parser = new FrameParser((from, planId, payload) => this.#deliver(from, planId, payload));
    stream.onData((chunk) => {
      const err = parser.push(chunk);
      if (err) {
        (this.#o.log ?? console.error)(`[kv ${this.rank}] closing a peer connection: ${err}`);
        stream.destroy();
      }
    });
    stream.onClose(() => {});
  }

  #deliver(from: number, planId: string, payload: Uint8Array): void {
    this.counters.framesReceived++;
    this.counters.bytesReceived += payload.byteLength;
    for (const [suffix, handler] of this.#diverted) {
      if (!planId.endsWith(suffix)) continue;
      try {
        handler(from, planId, payload);
      } catch (e) {
        (this.#o.log ?? console.error)(
          `[kv ${this.rank}] handler of ${JSON.stringify(suffix)} frames failed on ${
            JSON.stringify(planId)
          } from rank ${from}: ${(e as Error).message}`,
        );
      }
      return;
    }
    if (this.#cancelled.has(planId)) {
      this.counters.dropped++;
      return;
    }
    const w = this.#waiting.get(planId);
    if (w) {
      this.#waiting.delete(planId);
      if (w.from !== from) {
        w.reject(new RangeError(`plan ${planId}: payload came from rank ${from}, expected rank ${w.from}`));
      } else w.resolve(payload);
      return;
    }
    const now = Date.now();
    const ttl = this.#o.unclaimedTtlMs ?? 60_000;
    for (const [id, a] of this.#arrived) {
      if (now - a.at < ttl) break;
      this.#arrived.delete(id);
      this.counters.dropped++;
    }
    this.#arrived.set(planId, { from, payload, at: now });
  }
}

/** Incremental parser of channel frames; payload bytes are copied once into their own buffer. */
class FrameParser {
  readonly #header = new Uint8Array(HEADER_BYTES);
  #headerHave = 0;
  #from = 0;
  #id: Uint8Array | undefined;
  #idHave = 0;
  #payload: Uint8Array | undefined;
  #payloadHave = 0;

  constructor(private readonly onFrame: (from: number, planId: string, payload: Uint8Array) => void) {}

  /** Consumes a chunk; returns an error message when the stream is corrupt. */
  push(chunk: Uint8Array): string | undefined {
    let i = 0;
    while (i < chunk.length) {
      if (this.#headerHave < HEADER_BYTES) {
        const n = Math.min(HEADER_BYTES - this.#headerHave, chunk.length - i);
        this.#header.set(chunk.subarray(i, i + n), this.#headerHave);
        this.#headerHave += n;
        i += n;
        if (this.#headerHave < HEADER_BYTES) break;
        const dv = new DataView(this.#header.buffer);
        if (dv.getUint32(0) !== MAGIC) return `bad frame magic 0x${dv.getUint32(0).toString(16)}`;
        const idLen = dv.getUint32(8);
        if (idLen === 0 || idLen > MAX_PLAN_ID_BYTES) return `bad plan id length ${idLen}`;
        const len = dv.getBigUint64(12);
        if (len > BigInt(Number.MAX_SAFE_INTEGER)) return `bad payload length ${len}`;
        this.#from = dv.getUint32(4);
        this.#id = new Uint8Array(idLen);
        this.#idHave = 0;
        this.#payload = new Uint8Array(Number(len));
        this.#payloadHave = 0;
      }
      const id = this.#id!;
      if (this.#idHave < id.length) {
        const n = Math.min(id.length - this.#idHave, chunk.length - i);
        id.set(chunk.subarray(i, i + n), this.#idHave);
        this.#idHave += n;
        i += n;
      }
      const payload = this.#payload!;
      if (this.#idHave === id.length && this.#payloadHave < payload.length) {
        const n = Math.min(payload.length - this.#payloadHave, chunk.length - i);
        payload.set(chunk.subarray(i, i + n), this.#payloadHave);
        this.#payloadHave += n;
        i += n;
      }
      if (this.#idHave === id.length && this.#payloadHave === payload.length) {
        this.#headerHave = 0;
        this.onFrame(this.#from, new TextDecoder().decode(id), payload);
      }
    }
    return undefined;
  }
}

/** Payloads up to this size are copied behind their header and sent in one write. */
const SMALL_FRAME_BYTES = 64 * 1024;

function joined(header: Uint8Array, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(header.length + payload.byteLength);
  out.set(header);
  out.set(payload, header.length);
  return out;
}
