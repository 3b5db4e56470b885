/**
 * A KV-event subscriber for one stream, as llm-d's subscribes (llm-d-router pkg/kvevents/
 * zmq_subscriber.go at ebab687): a SUB socket on the stream's endpoint, messages of exactly three
 * frames `(topic, seq, payload)`, and, with a replay endpoint, a DEALER that asks for `("", seq)`
 * on start (from 0, or from where a restarted subscriber left off) and on every gap in the
 * sequence, then reads `("", topic, seq, payload)` replies in order up to the end marker (an empty
 * payload). Live messages that arrive during a replay wait, and those the replay already covered
 * are dropped, so every batch is handed over once, in order, without a gap. Nothing blocks: call
 * {@link poll} on a timer.
 * @module
 */
import type { ZmqContext, ZmqSocket } from "../../../ffi/zmq/zmq_socket.ts";

/** One batch handed to the consumer. */
export interface ReceivedBatch {
  topic: string;
  seq: bigint;
  payload: Uint8Array;
}

/** Where and what to subscribe to. */
export interface SubscriberOptions {
  endpoint: string;
  replayEndpoint?: string | null;
  /** Subscription prefix of the topic (llm-d subscribes to "kv@"); default all. */
  topicFilter?: string;
  /** First sequence number wanted: 0 (default) or one past the last a previous run applied. */
  startSeq?: bigint;
  /** Called for every batch, in order. */
  onBatch(batch: ReceivedBatch): void;
}

const decoder = new TextDecoder();

function seqOf(frame: Uint8Array): bigint | undefined {
  return frame.length === 8 ? new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0) : undefined;
}

/** Subscribes to one stream and replays what it missed. Dispose to close its sockets. */
export class KvEventSubscriber {
  readonly #o: SubscriberOptions;
  readonly #ctx: ZmqContext;
  readonly #sub: ZmqSocket;
  #dealer: ZmqSocket | undefined;
  /** Next sequence number to hand over. */
  #next: bigint;
  #replaying = false;
  #replayRequested = false;
  readonly #waiting: ReceivedBatch[] = [];
  /** Replays asked for, gaps seen, malformed frames ignored. */
  readonly counters = { replays: 0, gaps: 0, malformed: 0, batches: 0 };

  constructor(ctx: ZmqContext, o: SubscriberOptions) {
    this.#o = o;
    this.#ctx = ctx;
    this.#next = o.startSeq ?? 0n;
    this.#sub = ctx.socket("SUB");
    this.#sub.connect(o.endpoint);
    this.#sub.subscribe(o.topicFilter ?? "");
    if (o.replayEndpoint) this.#replay();
  }

  /** Sequence number of the last batch handed over (startSeq - 1 before any). */
  get lastSeq(): bigint {
    return this.#next - 1n;
  }

  /** True while a replay is under way. */
  get replaying(): boolean {
    return this.#replaying;
  }

  /** Reads everything queued on both sockets; returns the batches handed over. */
  poll(): number {
    const before = this.counters.batches;
    if (this.#replaying) this.#readReplay();
    for (let m = this.#sub.receive(); m !== null; m = this.#sub.receive()) {
      const seq = m.length === 3 ? seqOf(m[1]!) : undefined;
      if (seq === undefined) {
        this.counters.malformed++;
        continue;
      }
      const b = { topic: decoder.decode(m[0]!), seq, payload: m[2]! };
      if (this.#replaying) this.#waiting.push(b);
      else this.#live(b);
    }
    return this.counters.batches - before;
  }

  /** Closes the sockets. Idempotent. */
  dispose(): void {
    this.#dealer?.dispose();
    this.#sub.dispose();
  }

  #live(b: ReceivedBatch): void {
    if (b.seq < this.#next) return; // already handed over (by a replay)
    if (b.seq > this.#next && this.#o.replayEndpoint) {
      this.counters.gaps++;
      this.#waiting.push(b);
      this.#replay();
      return;
    }
    if (b.seq > this.#next) this.counters.gaps++; // no replay socket: the gap stays
    this.#hand(b);
  }

  #hand(b: ReceivedBatch): void {
    this.#next = b.seq + 1n;
    this.counters.batches++;
    this.#o.onBatch(b);
  }

  #replay(): void {
    this.#replaying = true;
    this.#replayRequested = false;
    this.counters.replays++;
    if (!this.#dealer) {
      this.#dealer = this.#ctx.socket("DEALER");
      this.#dealer.connect(this.#o.replayEndpoint!);
    }
    this.#askReplay();
  }

  #askReplay(): void {
    const seq = new Uint8Array(8);
    new DataView(seq.buffer).setBigUint64(0, this.#next);
    // A DEALER that has not connected yet takes nothing: ask again on the next poll.
    this.#replayRequested = this.#dealer!.send([new Uint8Array(0), seq]);
  }

  #readReplay(): void {
    if (!this.#replayRequested) this.#askReplay();
    for (let m = this.#dealer!.receive(); m !== null; m = this.#dealer!.receive()) {
      const f = m.length > 0 && m[0]!.length === 0 ? m.slice(1) : m;
      if (f.length === 3 && f[2]!.length === 0) return this.#replayDone();
      const seq = f.length === 3 ? seqOf(f[1]!) : undefined;
      if (seq === undefined) {
        this.counters.malformed++;
        continue;
      }
      if (seq < this.#next) continue;
      if (seq > this.#next) this.counters.gaps++; // the buffer no longer held what was missed
      this.#hand({ topic: decoder.decode(f[0]!), seq, payload: f[2]! });
    }
  }

  #replayDone(): void {
    this.#replaying = false;
    const waiting = this.#waiting.splice(0).sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
    for (const b of waiting) {
      if (this.#replaying) this.#waiting.push(b);
      else this.#live(b);
    }
  }
}
