/**
 * The ZeroMQ side of a node's KV events: one ZeroMQ context and one publisher per stream (one for
 * the node, or one per rank with vLLM's endpoint offsets), opened before the workers start so that
 * a missing libzmq or a taken port fails start-up at once, and one timer that answers replay
 * requests on every stream.
 * @module
 */
import { ZmqContext } from "../../ffi/zmq/zmq_socket.ts";
import { offsetEndpoint } from "./endpoints.ts";
import type { KvEventsConfig } from "./kv_events_config.ts";
import { ZmqEventPublisher } from "./zmq_event_publisher.ts";

/** How often replay requests are looked for: a consumer that asks waits at most this long to be answered. */
const REPLAY_POLL_MS = 10;

/** A stream's publisher and the data-parallel rank its batches carry. */
export interface StreamPublisher {
  /** The rank whose cache the stream follows, or "node". */
  readonly stream: number | "node";
  /** data_parallel_rank of its batches (0 for the node stream, as vLLM without data parallelism). */
  readonly dataParallelRank: number;
  readonly publisher: ZmqEventPublisher;
}

/** The open publishers of a node. Dispose to close them. */
export class KvEventPublishers {
  readonly config: KvEventsConfig;
  readonly streams: readonly StreamPublisher[];
  readonly #ctx: ZmqContext;
  /** Polls the replay sockets, when the streams have them. */
  readonly #timer: ReturnType<typeof setInterval> | undefined;
  #disposed = false;

  private constructor(config: KvEventsConfig, ctx: ZmqContext, streams: StreamPublisher[]) {
    this.config = config;
    this.#ctx = ctx;
    this.streams = streams;
    if (config.replayEndpoint === null) return;
    this.#timer = setInterval(() => {
      // A failed reply costs that subscriber its replay (it asks again), never the server.
      for (const s of this.streams) {
        try {
          s.publisher.serviceReplay();
        } catch {
          // the subscriber retries
        }
      }
    }, REPLAY_POLL_MS);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /**
   * Opens the streams of `config` for `worldSize` ranks. Throws LibzmqNotFoundError when libzmq is
   * missing, ZmqError (naming the endpoint) when a socket cannot bind or connect, RangeError for an
   * endpoint that cannot be offset per rank.
   */
  static open(config: KvEventsConfig, worldSize: number): KvEventPublishers {
    if (!Number.isInteger(worldSize) || worldSize < 1) {
      throw new RangeError(`worldSize must be an integer >= 1, got ${worldSize}`);
    }
    const ranks: (number | "node")[] = config.granularity === "rank"
      ? Array.from({ length: worldSize }, (_, r) => r)
      : ["node"];
    // Every endpoint is computed before any socket opens: a bad one fails with nothing to close.
    const plans = ranks.map((stream) => {
      const offset = stream === "node" ? 0 : stream;
      return {
        stream,
        endpoint: offsetEndpoint(config.endpoint, offset),
        replayEndpoint: config.replayEndpoint === null ? null : offsetEndpoint(config.replayEndpoint, offset),
      };
    });
    const ctx = new ZmqContext();
    const streams: StreamPublisher[] = [];
    try {
      for (const p of plans) {
        const publisher = new ZmqEventPublisher(ctx, {
          endpoint: p.endpoint,
          replayEndpoint: p.replayEndpoint,
          topic: config.topic,
          hwm: config.hwm,
          bufferSteps: config.bufferSteps,
        });
        streams.push({ stream: p.stream, dataParallelRank: p.stream === "node" ? 0 : p.stream, publisher });
      }
    } catch (e) {
      for (const s of streams) s.publisher.dispose();
      ctx.dispose();
      throw e;
    }
    return new KvEventPublishers(config, ctx, streams);
  }

  /** Every stream's endpoints as bound or connected (for logs and tests). */
  describe(): { stream: number | "node"; endpoint: string; replayEndpoint: string | null }[] {
    return this.streams.map((s) => ({
      stream: s.stream,
      endpoint: s.publisher.boundEndpoint,
      replayEndpoint: s.publisher.boundReplayEndpoint,
    }));
  }

  /** Stops the timer and closes every socket and the context. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    clearInterval(this.#timer);
    for (const s of this.streams) s.publisher.dispose();
    this.#ctx.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
