/**
 * One KV-event stream on ZeroMQ, framed as vLLM's ZmqEventPublisher frames it: every batch goes out
 * on a PUB socket as `(topic, seq, payload)`, seq an 8-byte big-endian counter from 0, and is kept
 * in a bounded replay buffer. The optional ROUTER socket answers a request `(identity, "", seq)`
 * with every buffered batch from that number on, then an end marker whose seq is -1 (0xff x 8) and
 * whose payload is empty. Each reply carries the topic too, `(identity, "", topic, seq, payload)`:
 * vLLM's replies have no topic frame (`(identity, "", seq, payload)`), but llm-d's replay consumer
 * (llm-d-router pkg/kvevents/zmq_subscriber.go at ebab687, requestReplay) reads exactly the three
 * frames of a live message after the delimiter and refuses two, so this follows llm-d.
 *
 * Nothing here blocks: sends use ZMQ_DONTWAIT (a PUB drops at its high-water mark, as ZeroMQ
 * defines, and the replay buffer still has the batch), and the owner calls {@link serviceReplay}
 * on a timer.
 * @module
 */
import { ZMQ_OPT } from "../../ffi/zmq/libzmq.ts";
import type { ZmqContext, ZmqSocket } from "../../ffi/zmq/zmq_socket.ts";
import { bindsEndpoint } from "./endpoints.ts";
import { ReplayBuffer } from "./replay_buffer.ts";

/** The end-of-replay sequence number: -1 as a signed 64-bit big-endian integer. */
export const END_OF_REPLAY_SEQ = 0xffff_ffff_ffff_ffffn;

/** What one stream publishes to and how. */
export interface StreamEndpoints {
  /** PUB endpoint (bound or connected by vLLM's rule). */
  endpoint: string;
  /** ROUTER endpoint for replay requests (always bound), if any. */
  replayEndpoint: string | null;
  topic: string;
  /** ZMQ_SNDHWM of the PUB socket. */
  hwm: number;
  /** Batches kept for replay. */
  bufferSteps: number;
}

/** The 8-byte big-endian frame of a sequence number. */
export function seqFrame(seq: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, seq);
  return out;
}

/** A PUB socket, its replay ROUTER and buffer. Dispose to close the sockets. */
export class ZmqEventPublisher {
  /** Where the PUB socket is (the resolved address when it binds). */
  readonly boundEndpoint: string;
  /** Where the ROUTER socket listens, or null. */
  readonly boundReplayEndpoint: string | null;
  readonly #pub: ZmqSocket;
  readonly #router: ZmqSocket | undefined;
  readonly #topic: Uint8Array;
  readonly #buffer: ReplayBuffer;
  #nextSeq = 0n;
  #disposed = false;

  /** Opens the sockets; throws ZmqError (a taken port, a bad endpoint) after closing what it opened. */
  constructor(ctx: ZmqContext, e: StreamEndpoints) {
    this.#topic = new TextEncoder().encode(e.topic);
    this.#buffer = new ReplayBuffer(e.bufferSteps);
    this.#pub = ctx.socket("PUB");
    try {
      this.#pub.setInt(ZMQ_OPT.SNDHWM, e.hwm);
      if (bindsEndpoint(e.endpoint)) {
        this.#pub.bind(e.endpoint);
        this.boundEndpoint = this.#pub.lastEndpoint();
      } else {
        this.#pub.connect(e.endpoint);
        this.boundEndpoint = e.endpoint;
      }
      if (e.replayEndpoint !== null) {
        this.#router = ctx.socket("ROUTER");
        this.#router.bind(e.replayEndpoint);
        this.boundReplayEndpoint = this.#router.lastEndpoint();
      } else this.boundReplayEndpoint = null;
    } catch (err) {
      this.#router?.dispose();
      this.#pub.dispose();
      throw err;
    }
  }

  /** Sequence number of the last published batch, or -1n before the first. */
  get lastSeq(): bigint {
    return this.#nextSeq - 1n;
  }

  /** Publishes one batch payload; returns its sequence number. */
  publish(payload: Uint8Array): bigint {
    if (this.#disposed) throw new Error("ZmqEventPublisher was used after dispose()");
    const seq = this.#nextSeq++;
    this.#pub.send([this.#topic, seqFrame(seq), payload]);
    this.#buffer.push(seq, payload);
    return seq;
  }

  /** Answers every replay request waiting on the ROUTER socket (a no-op without one). */
  serviceReplay(): void {
    if (this.#disposed || !this.#router) return;
    for (let m = this.#router.receive(); m !== null; m = this.#router.receive()) {
      // (identity, "", start_seq) as vLLM's ROUTER expects it; anything else is ignored, as there.
      if (m.length !== 3 || m[1]!.length !== 0 || m[2]!.length !== 8) continue;
      const identity = m[0]!;
      const start = new DataView(m[2]!.buffer, m[2]!.byteOffset, 8).getBigUint64(0);
      const empty = new Uint8Array(0);
      for (const b of this.#buffer.from(start)) {
        this.#router.send([identity, empty, this.#topic, seqFrame(b.seq), b.payload]);
      }
      this.#router.send([identity, empty, this.#topic, seqFrame(END_OF_REPLAY_SEQ), empty]);
    }
  }

  /** Closes both sockets. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#router?.dispose();
    this.#pub.dispose();
  }
}
