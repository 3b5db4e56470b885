/**
 * A request as the engine tracks it: its tokens (prompt then output), lifecycle status, block table,
 * progress through the KV cache, sampling parameters and timestamps. The same class runs in the
 * in-process LLM and inside worker processes; `SequenceInit` is the plain data that travels.
 * @module
 */
import { type BlockHash, blockHash, rootHash } from "./block_hash.ts";
import type { FinishReason, PromptLogprob, RequestOutput, TopLogprob } from "./outputs.ts";
import type { SamplingParams } from "./sampling_params.ts";

/** Lifecycle of a sequence. Preempted sequences wait again and recompute their K/V. */
export type SequenceStatus = "waiting" | "running" | "preempted" | "finished";

/** What is needed to create a Sequence (also its wire form between processes). */
export interface SequenceInit {
  requestId: string;
  promptTokenIds: readonly number[];
  params: SamplingParams;
  blockSize: number;
  cacheSalt?: string;
  /** ms, performance-clock based; defaults to now. */
  arrivalTime?: number;
  /** Sampling seed; defaults to params.seed, else a random one. */
  seed?: bigint;
  /**
   * Chained hashes of the prompt's complete blocks, when the caller has them already (they were
   * computed for routing with the same block size and salt); they are not recomputed.
   */
  promptBlockHashes?: readonly BlockHash[];
}

/** One request inside an engine. */
export class Sequence {
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  /** Prompt then output token ids. */
  readonly tokenIds: number[];
  readonly params: SamplingParams;
  readonly blockSize: number;
  readonly cacheSalt: string | undefined;
  /** Seed of the counter-based sampler (see lp_step): fixed per request, so outputs do not depend on batching. */
  readonly seed: bigint;
  readonly arrivalTime: number;
  /** When a step first scheduled it (set by the engine that runs it). */
  firstScheduledTime: number | undefined;
  firstTokenTime: number | undefined;
  finishTime: number | undefined;
  status: SequenceStatus = "waiting";
  finishReason: FinishReason | undefined;
  /** Physical block ids, in token order. */
  blockTable: number[] = [];
  /** Leading block-table entries already published Ready by the block manager. */
  numReadyBlocks = 0;
  /** Prompt tokens served from the prefix cache at the latest admission. */
  numCachedTokens = 0;
  /** Tokens whose K/V is in the cache (or is being written by the step in flight). */
  numComputedTokens = 0;
  /** Times this sequence was preempted (its K/V dropped and recomputed). */
  numPreemptions = 0;
  /** Chosen-token logprob of each output token. */
  readonly outputLogprobs: number[] = [];
  /** Top alternatives of each output token, when the params ask for them. */
  readonly outputTopLogprobs: TopLogprob[][] = [];
  /**
   * With params.promptLogprobs: entry i is prompt token i + 1's, scored at position i. Filled in
   * position order as prefill chunks compute them; a recompute after preemption adds none.
   */
  readonly promptLogprobs: PromptLogprob[] = [];
  /** Chained hashes of every complete block of tokenIds. */
  readonly blockHashes: BlockHash[] = [];
  /** Parent hash of the first block (depends on the cache salt). */
  readonly rootHash: BlockHash;

  constructor(init: SequenceInit) {
    if (!Number.isInteger(init.blockSize) || init.blockSize <= 0) {
      throw new RangeError(`blockSize must be a positive integer, got ${init.blockSize}`);
    }
    if (init.promptTokenIds.length === 0) throw new RangeError(`request ${init.requestId} has an empty prompt`);
    this.requestId = init.requestId;
    // A private copy, typed readonly but not frozen: freezing a 9k-token array took 2.5 ms (JSC
    // moves it to slow storage), on the worker's event loop for every dispatched request.
    this.promptTokenIds = [...init.promptTokenIds];
    this.tokenIds = [...init.promptTokenIds];
    this.params = init.params;
    this.blockSize = init.blockSize;
    this.cacheSalt = init.cacheSalt || undefined;
    this.arrivalTime = init.arrivalTime ?? performance.timeOrigin + performance.now();
    this.rootHash = rootHash(this.cacheSalt);
    this.seed = init.seed ?? (init.params.seed !== undefined ? BigInt(init.params.seed) : randomSeed());
    if (init.promptBlockHashes) {
      const complete = Math.floor(this.tokenIds.length / this.blockSize);
      if (init.promptBlockHashes.length !== complete) {
        throw new RangeError(
          `request ${init.requestId}: ${init.promptBlockHashes.length} prompt block hashes for ${complete} complete blocks`,
        );
      }
      this.blockHashes.push(...init.promptBlockHashes);
    }
    this.#extendBlockHashes();
  }

  get numTokens(): number {
    return this.tokenIds.length;
  }

  get numPromptTokens(): number {
    return this.promptTokenIds.length;
  }

  get numOutputTokens(): number {
    return this.tokenIds.length - this.promptTokenIds.length;
  }

  get outputTokenIds(): number[] {
    return this.tokenIds.slice(this.promptTokenIds.length);
  }

  get lastTokenId(): number {
    return this.tokenIds[this.tokenIds.length - 1]!;
  }

  get isFinished(): boolean {
    return this.status === "finished";
  }

  /** Appends a sampled token (with its top alternatives, if asked for); hashes the block it completes, if any. */
  appendToken(tokenId: number, logprob: number, now: number, top?: TopLogprob[]): void {
    this.tokenIds.push(tokenId);
    this.outputLogprobs.push(logprob);
    if (top) this.outputTopLogprobs.push(top);
    this.firstTokenTime ??= now;
    if (this.tokenIds.length % this.blockSize === 0) this.#extendBlockHashes();
  }

  /** Marks the sequence finished (idempotent: the first reason wins). */
  finish(reason: FinishReason, now: number): void {
    if (this.status === "finished") return;
    this.status = "finished";
    this.finishReason = reason;
    this.finishTime = now;
  }

  /** The plain data that recreates this request elsewhere (without progress). */
  toInit(): SequenceInit {
    return {
      requestId: this.requestId,
      promptTokenIds: this.promptTokenIds,
      params: this.params,
      blockSize: this.blockSize,
      cacheSalt: this.cacheSalt,
      arrivalTime: this.arrivalTime,
      seed: this.seed,
    };
  }

  /** The final output (text supplied by the caller's detokenizer). */
  toOutput(text: string, rank: number): RequestOutput {
    return {
      requestId: this.requestId,
      promptTokenIds: [...this.promptTokenIds],
      tokenIds: this.outputTokenIds,
      text,
      finishReason: this.finishReason ?? "abort",
      ...(this.params.logprobs ? { logprobs: [...this.outputLogprobs] } : {}),
      ...(this.params.logprobs && this.params.topLogprobs > 0 ? { topLogprobs: [...this.outputTopLogprobs] } : {}),
      ...(this.params.promptLogprobs !== undefined ? { promptLogprobs: [null, ...this.promptLogprobs] } : {}),
      metrics: {
        arrivalTime: this.arrivalTime,
        ...(this.firstScheduledTime !== undefined ? { firstScheduledTime: this.firstScheduledTime } : {}),
        firstTokenTime: this.firstTokenTime,
        finishTime: this.finishTime,
        numCachedTokens: this.numCachedTokens,
        rank,
      },
    };
  }

  #extendBlockHashes(): void {
    const bs = this.blockSize;
    const complete = Math.floor(this.tokenIds.length / bs);
    const first = this.blockHashes.length;
    if (first >= complete) return;
    let parent = first > 0 ? this.blockHashes[first - 1]! : this.rootHash;
    // One typed copy of the new blocks' tokens, hashed block by block through views of it.
    const ids = Int32Array.from(this.tokenIds.slice(first * bs, complete * bs));
    for (let b = 0; b < complete - first; b++) {
      parent = blockHash(parent, ids.subarray(b * bs, (b + 1) * bs));
      this.blockHashes.push(parent);
    }
  }
}

function randomSeed(): bigint {
  const words = crypto.getRandomValues(new Uint32Array(2));
  return (BigInt(words[0]!) << 32n) | BigInt(words[1]!);
}
