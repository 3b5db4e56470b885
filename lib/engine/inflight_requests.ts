/**
 * The launcher's table of requests in flight: where each runs, what it has streamed so far, and
 * the queue its caller reads. Turns worker token deltas and finishes into StreamDeltas and
 * RequestOutputs, and fails a dead worker's requests with a typed error.
 * @module
 */
import { CapacityError, WorkerDiedError } from "../core/errors.ts";
import type { RequestOutput, StreamDelta } from "../core/outputs.ts";
import type { SamplingParams } from "../core/sampling_params.ts";
import { DeltaQueue } from "../local/delta_queue.ts";
import type { MessageOf } from "../protocol/messages.ts";

/** One request the launcher is serving. */
export interface InflightRequest {
  readonly requestId: string;
  readonly promptTokenIds: number[];
  readonly sampling: SamplingParams;
  readonly blockHashes: string[];
  readonly cacheSalt: string | undefined;
  readonly sessionId: string | undefined;
  readonly arrivalTime: number;
  readonly queue: DeltaQueue<StreamDelta>;
  /** Rank it was dispatched to; -1 while routing. */
  rank: number;
  /** Output tokens streamed to the caller so far (a retry is only safe before the first). */
  streamedTokens: number;
  /** abort() was called before the dispatch happened. */
  abortRequested: boolean;
  /** Times it was dispatched again after its rank died. */
  retries: number;
  /** Run once when the request leaves the table (e.g. detach an AbortSignal listener). */
  onEnd?: () => void;
}

/** Requests in flight, by id. */
export class InflightRequests {
  readonly #byId = new Map<string, InflightRequest>();

  get size(): number {
    return this.#byId.size;
  }

  has(requestId: string): boolean {
    return this.#byId.has(requestId);
  }

  get(requestId: string): InflightRequest | undefined {
    return this.#byId.get(requestId);
  }

  /** Registers a new request; RangeError on a duplicate id. */
  add(
    r: Omit<InflightRequest, "queue" | "rank" | "streamedTokens" | "abortRequested" | "retries" | "onEnd">,
  ): InflightRequest {
    if (this.#byId.has(r.requestId)) {
      throw new RangeError(`request id ${JSON.stringify(r.requestId)} is already in use`);
    }
    const full: InflightRequest = {
      ...r,
      queue: new DeltaQueue<StreamDelta>(),
      rank: -1,
      streamedTokens: 0,
      abortRequested: false,
      retries: 0,
    };
    this.#byId.set(r.requestId, full);
    return full;
  }

  /** Requests dispatched to `rank`. */
  onRank(rank: number): InflightRequest[] {
    return [...this.#byId.values()].filter((r) => r.rank === rank);
  }

  /** Requests per rank (dispatched ones only). */
  countByRank(): Map<number, number> {
    const m = new Map<number, number>();
    for (const r of this.#byId.values()) if (r.rank >= 0) m.set(r.rank, (m.get(r.rank) ?? 0) + 1);
    return m;
  }

  /** Forwards one step's token deltas to their callers. */
  onTokens(items: MessageOf<"token_delta">["items"]): void {
    for (const it of items) {
      const r = this.#byId.get(it.requestId);
      if (!r) continue; // finished or aborted meanwhile
      r.streamedTokens += it.tokenIds.length;
      r.queue.push({
        requestId: it.requestId,
        tokenIds: it.tokenIds,
        text: it.text,
        finished: false,
        ...(it.logprobs ? { logprobs: it.logprobs } : {}),
        ...(it.topLogprobs ? { topLogprobs: it.topLogprobs } : {}),
        ...(it.promptLogprobs ? { promptLogprobs: it.promptLogprobs } : {}),
      });
    }
  }

  /** Ends a request from the worker's finish message (a typed error for reason "error"). */
  onFinish(m: MessageOf<"finish">, rank: number): InflightRequest | undefined {
    const r = this.#byId.get(m.requestId);
    if (!r || !this.#remove(r)) return undefined;
    if (m.reason === "error") {
      r.queue.fail(remoteError(m.error, rank, m.requestId));
      return r;
    }
    const output: RequestOutput | undefined = m.output
      ? {
        requestId: r.requestId,
        promptTokenIds: r.promptTokenIds,
        tokenIds: m.output.tokenIds,
        text: m.output.text,
        finishReason: m.reason,
        ...(m.output.logprobs ? { logprobs: m.output.logprobs } : {}),
        ...(m.output.topLogprobs ? { topLogprobs: m.output.topLogprobs } : {}),
        ...(m.output.promptLogprobs ? { promptLogprobs: m.output.promptLogprobs } : {}),
        metrics: m.output.metrics,
      }
      : undefined;
    r.queue.push({
      requestId: r.requestId,
      tokenIds: m.tokenIds,
      text: m.text,
      ...(m.logprobs ? { logprobs: m.logprobs } : {}),
      ...(m.topLogprobs ? { topLogprobs: m.topLogprobs } : {}),
      ...(m.promptLogprobs ? { promptLogprobs: m.promptLogprobs } : {}),
      finished: true,
      finishReason: m.reason,
      output: output ?? this.#emptyOutput(r, m.reason, rank),
    });
    r.queue.close();
    return r;
  }

  /** Ends a request that never reached a worker with finishReason "abort". */
  abortLocally(r: InflightRequest): void {
    if (!this.#remove(r)) return;
    r.queue.push({
      requestId: r.requestId,
      tokenIds: [],
      text: "",
      finished: true,
      finishReason: "abort",
      output: this.#emptyOutput(r, "abort", r.rank),
    });
    r.queue.close();
  }

  /** Fails a request with `error`. */
  fail(r: InflightRequest, error: Error): void {
    if (!this.#remove(r)) return;
    r.queue.fail(error);
  }

  /** Every request still in flight. */
  all(): InflightRequest[] {
    return [...this.#byId.values()];
  }

  #remove(r: InflightRequest): boolean {
    if (this.#byId.get(r.requestId) !== r) return false;
    this.#byId.delete(r.requestId);
    r.onEnd?.();
    return true;
  }

  #emptyOutput(r: InflightRequest, reason: "stop" | "length" | "abort" | "error", rank: number): RequestOutput {
    return {
      requestId: r.requestId,
      promptTokenIds: r.promptTokenIds,
      tokenIds: [],
      text: "",
      finishReason: reason,
      metrics: { arrivalTime: r.arrivalTime, finishTime: Date.now(), numCachedTokens: 0, rank: Math.max(rank, 0) },
    };
  }
}

function remoteError(e: { name: string; message: string } | undefined, rank: number, requestId: string): Error {
  const message = e?.message ?? `request ${requestId} failed on worker ${rank}`;
  if (e?.name === "CapacityError") return new CapacityError(message);
  if (e?.name === "WorkerDiedError") return new WorkerDiedError(message, rank);
  if (e?.name === "RangeError") return new RangeError(message);
  if (e?.name === "TypeError") return new TypeError(message);
  const err = new Error(`worker ${rank}: ${message}`);
  err.name = e?.name ?? "Error";
  return err;
}
