/**
 * The local scheduler: continuous batching of one worker's requests. Each step first gives every
 * running sequence its next tokens (a decode token, or the next chunk of an unfinished prefill),
 * preempting the youngest running sequences by recompute when blocks run out, then admits waiting
 * sequences first-come first-served into the remaining token budget (the last one possibly as a
 * partial chunk). A new prefill starts with at least a block of tokens (or all it has left) unless
 * the step is otherwise empty, and a prompt that shares leading blocks with a prefill under way
 * waits for them: a prompt's cached prefix is looked up once, at admission, so either way it would
 * compute blocks another prompt is computing. Requests that can never fit are rejected on arrival
 * with a CapacityError.
 *
 * Optionally (`longPrefillChunk` > 0), long prefills yield to short work: while sequences decode
 * or a waiting prompt is short (at most `longPrefillChunk` tokens left to prefill), the prefills
 * longer than that share `longPrefillChunk` tokens per step, in arrival order. Steps then stay
 * short, so decodes and short prompts do not wait behind a whole budget of someone else's prompt;
 * a long prompt alone still takes the whole budget per step. It trades time to first token of
 * long prompts for time per output token (the e2e benchmark's results show both), so it is off by
 * default.
 *
 * Apart from that knob, with chunked prefill every step's prefill tokens are also capped by cost
 * (`stepTargetMs`, on by default): a {@link StepBudget} learns the step time from the worker's
 * measured steps as a function of tokens and attention context, and a step takes only the prefill
 * tokens whose predicted time fits the target. A step holds its thread (the CPU backend computes
 * it in the call), so this keeps every step short on any backend: on a slow one a long prompt is
 * split into chunks that shrink as its context grows, on a fast GPU the cap sits far above
 * `maxNumBatchedTokens` and never binds. Decodes are counted in the step's cost but never cut
 * (`maxNumSeqs` bounds them), and a step may always take `floorTokens` prefill tokens, so prefills
 * progress however slow a step is.
 * @module
 */
import { sharedBlocks } from "../core/block_hash.ts";
import type { RankLoad } from "../core/block_snapshot.ts";
import { CapacityError } from "../core/errors.ts";
import type { FinishReason, TopLogprob } from "../core/outputs.ts";
import type { Sequence } from "../core/sequence.ts";
import type { BlockManager } from "./block_manager.ts";
import { fitPromptRows, stepRowsOf } from "./prompt_logprob_rows.ts";
import { chunkPairs, DEFAULT_STEP_TARGET_MS, StepBudget } from "./step_budget.ts";

/** Batching limits of one worker. */
export interface SchedulerConfig {
  /** Sequences running at once. */
  maxNumSeqs: number;
  /** Tokens computed by one step. */
  maxNumBatchedTokens: number;
  /** Prompt plus output tokens of one request. */
  maxModelLen: number;
  /** Split long prefills across steps (else a prompt is prefilled in one step). */
  enableChunkedPrefill: boolean;
  /**
   * Tokens per step that prefills longer than this share while short work is there (see the module
   * doc; chunked prefill only). Default {@link DEFAULT_LONG_PREFILL_CHUNK}: 0, no limit.
   */
  longPrefillChunk?: number;
  /**
   * Predicted time a step's prefill tokens may fill, ms (see the module doc; chunked prefill only).
   * Default {@link DEFAULT_STEP_TARGET_MS} with chunked prefill, 0 (no cost cap) without it.
   */
  stepTargetMs?: number;
}

/** Default of {@link SchedulerConfig.longPrefillChunk}: no limit (see the module doc for why). */
export const DEFAULT_LONG_PREFILL_CHUNK = 0;

/** One sequence's share of a step: tokens [start, start + numNewTokens) of seq.tokenIds. */
export interface ScheduledSequence {
  seq: Sequence;
  start: number;
  numNewTokens: number;
  /** The step reaches the sequence's last token, so it samples the next one. */
  sample: boolean;
  /** A one-token step of a sequence that already generated output. */
  isDecode: boolean;
}

/** What one step computes. */
export interface SchedulerOutput {
  scheduled: ScheduledSequence[];
  numTokens: number;
  /** Sequences preempted while scheduling this step (their K/V was dropped). */
  preempted: Sequence[];
}

/** Step kind, for timing splits. */
export type StepKind = "prefill" | "decode" | "mixed";

/** Classifies a scheduled step. */
export function stepKind(out: SchedulerOutput): StepKind {
  let decode = 0;
  for (const s of out.scheduled) if (s.isDecode) decode++;
  return decode === out.scheduled.length ? "decode" : decode === 0 ? "prefill" : "mixed";
}

/** Continuous-batching scheduler over one block manager. */
export class Scheduler {
  readonly config: Readonly<SchedulerConfig & { longPrefillChunk: number; stepTargetMs: number }>;
  readonly blocks: BlockManager;
  /** The cost cap on each step's prefill tokens; null when `stepTargetMs` is 0. Feed it measured steps. */
  readonly stepBudget: StepBudget | null;
  /** FCFS queue; preempted sequences return to its front. */
  readonly waiting: Sequence[] = [];
  /** Admission order: the last is the youngest, preempted first. */
  readonly running: Sequence[] = [];
  numPreemptions = 0;

  constructor(config: SchedulerConfig, blocks: BlockManager) {
    for (const k of ["maxNumSeqs", "maxNumBatchedTokens", "maxModelLen"] as const) {
      if (!Number.isInteger(config[k]) || config[k] <= 0) {
        throw new RangeError(`${k} must be a positive integer, got ${config[k]}`);
      }
    }
    const chunk = config.longPrefillChunk ?? DEFAULT_LONG_PREFILL_CHUNK;
    if (!Number.isInteger(chunk) || chunk < 0) {
      throw new RangeError(`longPrefillChunk must be a non-negative integer, got ${config.longPrefillChunk}`);
    }
    if (!config.enableChunkedPrefill && config.maxNumBatchedTokens < config.maxModelLen) {
      throw new RangeError(
        `without chunked prefill maxNumBatchedTokens (${config.maxNumBatchedTokens}) must be >= maxModelLen (${config.maxModelLen})`,
      );
    }
    const target = config.stepTargetMs ?? (config.enableChunkedPrefill ? DEFAULT_STEP_TARGET_MS : 0);
    if (!(Number.isFinite(target) && target >= 0)) {
      throw new RangeError(
        `stepTargetMs must be a non-negative number of ms (0: no cost cap), got ${config.stepTargetMs}`,
      );
    }
    if (target > 0 && !config.enableChunkedPrefill) {
      throw new RangeError(
        `stepTargetMs (${target}) caps prefill chunks, so it needs chunked prefill; set stepTargetMs to 0 or enable chunked prefill`,
      );
    }
    this.config = { ...config, longPrefillChunk: chunk, stepTargetMs: target };
    this.blocks = blocks;
    this.stepBudget = target > 0 ? new StepBudget({ targetMs: target }) : null;
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  get numRunning(): number {
    return this.running.length;
  }

  get hasUnfinished(): boolean {
    return this.waiting.length + this.running.length > 0;
  }

  /**
   * Tokens an empty step may compute now for a prompt from position 0: `maxNumBatchedTokens`, or
   * less where the step budget caps it (what a load or wait estimate should assume per step).
   */
  get stepTokenBudget(): number {
    const sb = this.stepBudget;
    return Math.min(this.config.maxNumBatchedTokens, sb ? Math.max(sb.tokensAt(0), sb.floorTokens) : Infinity);
  }

  /** Throws a CapacityError when `seq` could never run here. */
  checkFits(seq: Sequence): void {
    const { maxModelLen } = this.config;
    const p = seq.numPromptTokens;
    const m = seq.params.maxTokens;
    if (p + m > maxModelLen) {
      throw new CapacityError(
        `request ${seq.requestId}: prompt (${p}) + max_tokens (${m}) = ${
          p + m
        } tokens exceeds max_model_len (${maxModelLen})`,
      );
    }
    // The last sampled token's K/V is never written.
    const need = this.blocks.blocksFor(p + m - 1);
    if (need > this.blocks.numBlocks) {
      throw new CapacityError(
        `request ${seq.requestId}: prompt (${p}) + max_tokens (${m}) needs ${need} KV blocks of ${this.blocks.blockSize} tokens, but the cache has ${this.blocks.numBlocks}`,
      );
    }
  }

  /** Queues a new request (FCFS). */
  add(seq: Sequence): void {
    this.checkFits(seq);
    seq.status = "waiting";
    this.waiting.push(seq);
  }

  /** Picks this step's tokens. Empty when nothing can run. */
  schedule(): SchedulerOutput {
    const scheduled: ScheduledSequence[] = [];
    const preempted: Sequence[] = [];
    let budget = this.config.maxNumBatchedTokens;
    let numTokens = 0;
    // The step's rows are at most maxNumSeqs (the native buffers' size): each running sequence may
    // take one, and those asking for prompt logprobs take one per scored prompt position beyond that.
    let extraRows = 0;
    const rowsLeft = () => this.config.maxNumSeqs - this.running.length - extraRows;
    const take = (seq: Sequence, n: number) => {
      const start = seq.numComputedTokens;
      const sample = start + n === seq.numTokens;
      scheduled.push({ seq, start, numNewTokens: n, sample, isDecode: n === 1 && sample && seq.numOutputTokens > 0 });
      budget -= n;
      numTokens += n;
      extraRows += Math.max(0, stepRowsOf(seq, start, n) - 1);
    };
    const long = this.#longPrefillLimit();
    let longBudget = long.budget;
    const cost = this.#stepCost();
    // Tokens a prefill of `left` tokens from position `start` may take now (0: it waits for a later step).
    const allowance = (left: number, start: number) =>
      Math.min(left, budget, left > long.threshold ? longBudget : left, cost.allowance(start));
    const took = (left: number, start: number, n: number) => {
      if (left > long.threshold) longBudget -= n;
      cost.took(start, n);
    };

    for (let i = 0; i < this.running.length && budget > 0;) {
      const seq = this.running[i]!;
      const left = seq.numTokens - seq.numComputedTokens;
      const start = seq.numComputedTokens;
      // A decode (or a prefill's last token) is never cut by cost; #stepCost counted it already.
      let n = left === 1 ? Math.min(1, budget) : allowance(left, start);
      if (n > 0) n = fitPromptRows(seq, start, n, rowsLeft() + 1);
      if (n === 0) {
        i++;
        continue;
      }
      if (this.blocks.allocateSlots(seq, n)) {
        take(seq, n);
        if (left > 1) took(left, start, n);
        i++;
        continue;
      }
      // Out of blocks: recompute the youngest later (possibly this sequence itself).
      const victim = this.running.pop()!;
      this.#preempt(victim);
      preempted.push(victim);
    }

    if (preempted.length === 0) {
      // Sequences whose prompt is not fully computed: their blocks may be what a waiting prompt shares.
      const prefilling = this.running.filter((r) => r.numComputedTokens < r.numPromptTokens);
      for (let i = 0; i < this.waiting.length && budget > 0 && rowsLeft() > 0;) {
        const seq = this.waiting[i]!;
        const cached = this.blocks.lookupPrefix(seq);
        if (this.#awaitsSharedPrefill(seq, cached.length, prefilling)) {
          i++;
          continue;
        }
        const start = cached.length * this.blocks.blockSize;
        const remaining = seq.numTokens - start;
        if (!this.config.enableChunkedPrefill && remaining > budget) break;
        let n = allowance(remaining, start);
        if (n > 0) n = fitPromptRows(seq, start, n, rowsLeft());
        // A new prefill starts with at least a block (or all it has left) unless the step is empty:
        // its prefix is looked up once, at admission, so one admitted on a step's last few tokens
        // never finds the blocks a request ahead of it is computing, and each admitted sequence
        // adds its own launches and sampling to every step for a few tokens.
        if (n > 0 && scheduled.length > 0 && n < Math.min(remaining, this.blocks.blockSize)) n = 0;
        if (n === 0) {
          i++; // a long prompt while the long share (or the step) is spent: shorter ones behind it may go
          continue;
        }
        if (!this.blocks.allocateSlots(seq, n, cached)) break;
        this.waiting.splice(i, 1);
        seq.status = "running";
        this.running.push(seq);
        prefilling.push(seq);
        take(seq, n);
        took(remaining, start, n);
      }
    }
    return { scheduled, numTokens, preempted };
  }

  /**
   * True when a prefill under way computes leading blocks of `seq`'s prompt that the cache does not
   * hold yet: `seq` then waits for them (its prefix is looked up once, at admission) instead of
   * computing them a second time beside it. Requests of one prefix that arrive together thus
   * prefill it once, as the lmpool router expects of a prompt it routes behind another of the same
   * prefix. Only `prefilling` sequences can hold such blocks back: a decoding one has published
   * its prompt's.
   */
  #awaitsSharedPrefill(seq: Sequence, cachedBlocks: number, prefilling: readonly Sequence[]): boolean {
    if (prefilling.length === 0) return false;
    const usable = this.blocks.cacheableBlocks(seq);
    if (cachedBlocks >= usable) return false;
    for (const r of prefilling) {
      if (Math.min(sharedBlocks(seq.blockHashes, r.blockHashes), usable) > cachedBlocks) return true;
    }
    return false;
  }

  /**
   * This step's cost cap on prefill tokens: the decodes of running sequences are counted up front,
   * each prefill piece then gets what the {@link StepBudget} predicts still fits, and at least what
   * is left of the floor. No cap without a step budget.
   */
  #stepCost(): { allowance(start: number): number; took(start: number, n: number): void } {
    const sb = this.stepBudget;
    if (!sb) return { allowance: () => Infinity, took: () => {} };
    const acc = { tokens: 0, pairs: 0 };
    let prefill = 0;
    for (const s of this.running) {
      if (s.numTokens - s.numComputedTokens !== 1) continue;
      acc.tokens++;
      acc.pairs += s.numTokens;
    }
    return {
      allowance: (start) => Math.max(sb.maxNewTokens(acc, start), sb.floorTokens - prefill),
      took: (start, n) => {
        acc.tokens += n;
        acc.pairs += chunkPairs(start, n);
        prefill += n;
      },
    };
  }

  /**
   * This step's limit on long prefills: the threshold above which a prefill counts as long and
   * the tokens all long ones may take together; no limit unless short work is there.
   */
  #longPrefillLimit(): { threshold: number; budget: number } {
    const none = { threshold: Infinity, budget: Infinity };
    const chunk = this.config.longPrefillChunk;
    if (chunk === 0 || !this.config.enableChunkedPrefill || chunk >= this.config.maxNumBatchedTokens) return none;
    const decoding = this.running.some((s) => s.numTokens - s.numComputedTokens === 1);
    const shortWaiting = () =>
      this.waiting.some((s) => s.numTokens - this.blocks.lookupPrefix(s).length * this.blocks.blockSize <= chunk);
    return decoding || shortWaiting() ? { threshold: chunk, budget: chunk } : none;
  }

  /**
   * Applies a finished step: advances computed counts, publishes completed blocks, appends the
   * sampled token of each sampling sequence (row r of `tokens` is the r-th sampling entry).
   */
  completeStep(
    out: SchedulerOutput,
    tokens: Int32Array,
    logprobs: Float32Array,
    now: number,
    topOf?: (row: number) => TopLogprob[] | undefined,
  ): void {
    let row = 0;
    for (const s of out.scheduled) {
      s.seq.numComputedTokens += s.numNewTokens;
      this.blocks.commitComputed(s.seq);
      if (s.sample) {
        // A row the native sampler refused (-1) ends its sequence with an error instead.
        const token = tokens[row]!;
        if (token >= 0) s.seq.appendToken(token, logprobs[row]!, now, topOf?.(row));
        row++;
      }
    }
  }

  /** Ends a running or waiting sequence and frees its blocks immediately. */
  finish(seq: Sequence, reason: FinishReason, now: number): void {
    this.#remove(seq);
    this.blocks.free(seq);
    seq.finish(reason, now);
  }

  /** Aborts a request by id; returns it, or undefined when it is not here. */
  abort(requestId: string, now: number): Sequence | undefined {
    const seq = this.running.find((s) => s.requestId === requestId) ??
      this.waiting.find((s) => s.requestId === requestId);
    if (seq) this.finish(seq, "abort", now);
    return seq;
  }

  /**
   * Load as routing weighs it. A waiting sequence counts only the tokens its admission will
   * prefill: its cached prefix is not work (counting it made a rank with a few requests queued
   * behind a long prefill look a whole prompt busier per request, and turned routing away from it).
   */
  load(): RankLoad {
    let runningTokens = 0;
    let waitingTokens = 0;
    for (const s of this.running) runningTokens += s.numTokens;
    for (const s of this.waiting) {
      waitingTokens += s.numTokens - this.blocks.lookupPrefix(s).length * this.blocks.blockSize;
    }
    return { numRunning: this.running.length, numWaiting: this.waiting.length, runningTokens, waitingTokens };
  }

  #preempt(seq: Sequence): void {
    this.blocks.free(seq);
    seq.numComputedTokens = 0;
    seq.numPreemptions++;
    seq.status = "preempted";
    this.waiting.unshift(seq);
    this.numPreemptions++;
  }

  #remove(seq: Sequence): void {
    let i = this.running.indexOf(seq);
    if (i >= 0) {
      this.running.splice(i, 1);
      return;
    }
    i = this.waiting.indexOf(seq);
    if (i >= 0) this.waiting.splice(i, 1);
  }
}
