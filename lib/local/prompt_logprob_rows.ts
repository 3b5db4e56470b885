/**
 * Prompt logprobs as scored rows of the native step (score_token_ids in lp_step, lmpool.h): prompt
 * position p < P - 1 of a sequence that asks for them gets a row whose score token is prompt token
 * p + 1, so the step returns, without sampling, that token's logprob and rank under the raw logits
 * at p and the most likely alternatives there, all computed on the device.
 *
 * The rows follow the step's sampled rows (so sampled row r stays the r-th sampling sequence, as
 * the scheduler and the engine read them) and share the step's row capacity with them: the native
 * buffers hold maxNumSeqs rows, so the scheduler cuts such a sequence's prefill chunk to the rows
 * left ({@link fitPromptRows}) rather than every step paying for buffers sized by tokens.
 * @module
 */
import type { StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import type { TopLogprob } from "../core/outputs.ts";
import type { Sequence } from "../core/sequence.ts";

/** What the rows need of a scheduled sequence: tokens [start, start + numNewTokens) of seq.tokenIds. */
interface ScheduledTokens {
  seq: Sequence;
  start: number;
  numNewTokens: number;
}

/** The prompt positions tokens [start, start + n) of `seq` score: [from, to) (none when to <= from). */
export function promptRowSpan(seq: Sequence, start: number, n: number): { from: number; to: number } {
  if (seq.params.promptLogprobs === undefined) return { from: 0, to: 0 };
  // Positions already scored (before a preemption) are not scored again.
  return { from: Math.max(start, seq.promptLogprobs.length), to: Math.min(start + n, seq.numPromptTokens - 1) };
}

/** Rows tokens [start, start + n) of `seq` take: its scored prompt positions, and one if the chunk samples. */
export function stepRowsOf(seq: Sequence, start: number, n: number): number {
  // Every sequence of every step asks: the common case returns before making a span.
  if (seq.params.promptLogprobs === undefined) return start + n === seq.numTokens ? 1 : 0;
  const { from, to } = promptRowSpan(seq, start, n);
  return Math.max(0, to - from) + (start + n === seq.numTokens ? 1 : 0);
}

/**
 * The longest chunk of at most `n` tokens from `start` whose rows fit in `rows` (>= 1). Only a
 * sequence that asks for prompt logprobs can need more than one row; it is cut before its sampled
 * token and the positions past the rows, so it always progresses by at least one token.
 */
export function fitPromptRows(seq: Sequence, start: number, n: number, rows: number): number {
  if (seq.params.promptLogprobs === undefined || stepRowsOf(seq, start, n) <= rows) return n;
  return Math.max(start, seq.promptLogprobs.length) + rows - start;
}

/** The scored rows of one step: added to its batch before the step, stored in their sequences after it. */
export class PromptLogprobRows {
  /** Where the step writes each row's rank (lp_step_batch's out_ranks). */
  readonly ranks: Int32Array;
  /** The sequence and position of each scored row, from row #first on. */
  readonly #seqs: Sequence[] = [];
  #first = 0;

  constructor(readonly maxRows: number) {
    this.ranks = new Int32Array(maxRows);
  }

  /**
   * Adds the scored rows of `scheduled` (in step order; sequence i's tokens start at
   * b.queryStart[i]) to `b` and `controls` from row `r`, after the sampled rows; returns the next
   * row. A row over `maxRows` is a RangeError: the scheduler keeps every step within it.
   */
  add(b: StepBatch, scheduled: readonly ScheduledTokens[], r: number, controls: StepControlsWriter): number {
    this.#seqs.length = 0;
    this.#first = r;
    for (let i = 0; i < scheduled.length; i++) {
      const { seq, start, numNewTokens } = scheduled[i]!;
      const k = seq.params.promptLogprobs;
      if (k === undefined) continue;
      const { from, to } = promptRowSpan(seq, start, numNewTokens);
      for (let p = from; p < to; p++, r++) {
        if (r >= this.maxRows) {
          throw new RangeError(`step needs more than ${this.maxRows} rows (prompt logprobs of ${seq.requestId})`);
        }
        b.sampleIndex[r] = b.queryStart[i]! + (p - start);
        // Valid sampling values the scored row never uses.
        b.temperature[r] = 0;
        b.topK[r] = 0;
        b.topP[r] = 1;
        b.seed[r] = 0n;
        controls.add({ scoreTokenId: seq.tokenIds[p + 1]!, topLogprobs: k });
        this.#seqs.push(seq);
      }
    }
    return r;
  }

  /** Whether the step being filled has scored rows (then it needs the ranks). */
  get any(): boolean {
    return this.#seqs.length > 0;
  }

  /**
   * Stores the rows' results in their sequences (after the step): row r's logprob from `logprobs`,
   * its rank and `topOf(r)`, its alternatives.
   */
  record(logprobs: Float32Array, topOf: (row: number) => TopLogprob[] | undefined): void {
    for (let j = 0; j < this.#seqs.length; j++) {
      const seq = this.#seqs[j]!, r = this.#first + j;
      // Rows of a sequence come in position order from its first unscored one (promptRowSpan).
      seq.promptLogprobs.push({ logprob: logprobs[r]!, rank: this.ranks[r]!, top: topOf(r) ?? [] });
    }
    this.#seqs.length = 0;
  }
}
