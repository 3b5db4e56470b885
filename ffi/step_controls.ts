/**
 * Per-row sampling controls of a step (min_p, penalties, logit bias, allowed and banned tokens, a
 * scored token, top logprobs) packed into a {@link StepBatch}'s optional arrays, as lp_step in
 * csrc/include/lmpool.h reads them. A writer owns its arrays (lists grow as needed) and attaches
 * only the ones some row of the step uses, so a step without controls passes NULL for all of them.
 * @module
 */
import type { StepBatch } from "./step_batch.ts";

/** Most alternatives per position lp_step is asked for (vLLM's default max_logprobs). */
export const MAX_TOP_LOGPROBS = 20;

/** One row's controls; an absent field is off. */
export interface RowControls {
  minP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repetitionPenalty?: number;
  /** Distinct tokens of the prompt and the output, each with its count in the output (0: prompt only). */
  penaltyTokenIds?: ArrayLike<number>;
  penaltyCounts?: ArrayLike<number>;
  /** [token id, bias] pairs. */
  logitBias?: ReadonlyArray<readonly [number, number]>;
  /** Non-empty: only these tokens may be chosen. */
  allowedTokenIds?: ArrayLike<number>;
  /** Tokens that may not be chosen at this step. */
  bannedTokenIds?: ArrayLike<number>;
  /** The row is not sampled; it returns this token's logprob (and its top alternatives). */
  scoreTokenId?: number;
  /** Alternatives to return, at most {@link MAX_TOP_LOGPROBS}. */
  topLogprobs?: number;
}

/** A growable int32 or float32 list. */
class List<T extends Int32Array | Float32Array> {
  length = 0;
  constructor(public data: T, private readonly make: (n: number) => T) {}
  reset(): void {
    this.length = 0;
  }
  push(values: ArrayLike<number>): void {
    this.#reserve(values.length);
    for (let i = 0; i < values.length; i++) this.data[this.length++] = values[i]!;
  }
  pushOne(v: number): void {
    this.#reserve(1);
    this.data[this.length++] = v;
  }
  #reserve(n: number): void {
    if (this.length + n <= this.data.length) return;
    const next = this.make(Math.max(2 * this.data.length, this.length + n));
    next.set(this.data.subarray(0, this.length));
    this.data = next;
  }
}

const ints = (n: number) => new Int32Array(n);
const floats = (n: number) => new Float32Array(n);

/** Packs the controls of up to `maxRows` rows per step. */
export class StepControlsWriter {
  readonly #minP: Float32Array;
  readonly #presence: Float32Array;
  readonly #frequency: Float32Array;
  readonly #repetition: Float32Array;
  readonly #score: Int32Array;
  readonly #top: Int32Array;
  readonly #penaltyStart: Int32Array;
  readonly #biasStart: Int32Array;
  readonly #allowedStart: Int32Array;
  readonly #bannedStart: Int32Array;
  readonly #penaltyIds = new List(ints(256), ints);
  readonly #penaltyCounts = new List(ints(256), ints);
  readonly #biasIds = new List(ints(64), ints);
  readonly #biasValues = new List(floats(64), floats);
  readonly #allowed = new List(ints(64), ints);
  readonly #banned = new List(ints(64), ints);
  readonly #outTopIds: Int32Array;
  readonly #outTopLogprobs: Float32Array;
  /** The controls given to each row of the step, for {@link repack}. */
  readonly #given: (RowControls | null)[] = [];
  #rows = 0;
  #any = { minP: false, penalties: false, bias: false, allowed: false, banned: false, score: false };
  #maxTop = 0;

  constructor(readonly maxRows: number) {
    this.#minP = floats(maxRows);
    this.#presence = floats(maxRows);
    this.#frequency = floats(maxRows);
    this.#repetition = floats(maxRows);
    this.#score = ints(maxRows);
    this.#top = ints(maxRows);
    this.#penaltyStart = ints(maxRows + 1);
    this.#biasStart = ints(maxRows + 1);
    this.#allowedStart = ints(maxRows + 1);
    this.#bannedStart = ints(maxRows + 1);
    this.#outTopIds = ints(maxRows * MAX_TOP_LOGPROBS);
    this.#outTopLogprobs = floats(maxRows * MAX_TOP_LOGPROBS);
  }

  /** Starts a step: rows are then added in order with {@link add}. */
  begin(): void {
    this.#rows = 0;
    this.#maxTop = 0;
    this.#any = { minP: false, penalties: false, bias: false, allowed: false, banned: false, score: false };
    for (const l of [this.#penaltyIds, this.#penaltyCounts, this.#biasIds, this.#biasValues, this.#allowed]) l.reset();
    this.#banned.reset();
  }

  /** Adds the next row's controls (null: none). Values go over as given; lp_step checks them per row. */
  add(c: RowControls | null): void {
    const r = this.#rows++;
    if (r >= this.maxRows) throw new RangeError(`StepControlsWriter: row ${r} beyond maxRows ${this.maxRows}`);
    this.#given[r] = c;
    const any = this.#any;
    this.#minP[r] = c?.minP ?? 0;
    this.#presence[r] = c?.presencePenalty ?? 0;
    this.#frequency[r] = c?.frequencyPenalty ?? 0;
    this.#repetition[r] = c?.repetitionPenalty ?? 1;
    this.#score[r] = c?.scoreTokenId ?? -1;
    this.#top[r] = c?.topLogprobs ?? 0;
    if (c) {
      any.minP ||= this.#minP[r] !== 0;
      any.score ||= c.scoreTokenId !== undefined;
      this.#maxTop = Math.max(this.#maxTop, Math.min(c.topLogprobs ?? 0, MAX_TOP_LOGPROBS));
      if (c.penaltyTokenIds && c.penaltyTokenIds.length > 0) {
        if (c.penaltyCounts?.length !== c.penaltyTokenIds.length) {
          throw new RangeError(
            `penaltyCounts has ${c.penaltyCounts?.length ?? 0} entries, penaltyTokenIds ${c.penaltyTokenIds.length}`,
          );
        }
        this.#penaltyIds.push(c.penaltyTokenIds);
        this.#penaltyCounts.push(c.penaltyCounts);
        any.penalties = true;
      }
      for (const [id, bias] of c.logitBias ?? []) {
        this.#biasIds.pushOne(id);
        this.#biasValues.pushOne(bias);
        any.bias = true;
      }
      if (c.allowedTokenIds && c.allowedTokenIds.length > 0) this.#allowed.push(c.allowedTokenIds), any.allowed = true;
      if (c.bannedTokenIds && c.bannedTokenIds.length > 0) this.#banned.push(c.bannedTokenIds), any.banned = true;
    }
    any.penalties ||= this.#presence[r] !== 0 || this.#frequency[r] !== 0 || this.#repetition[r] !== 1;
    this.#penaltyStart[r + 1] = this.#penaltyIds.length;
    this.#biasStart[r + 1] = this.#biasIds.length;
    this.#allowedStart[r + 1] = this.#allowed.length;
    this.#bannedStart[r + 1] = this.#banned.length;
  }

  /**
   * Packs the rows added since {@link begin} again, reading their controls anew: for controls
   * completed in place after their row was added (a structured-output mask computed while the
   * device runs the step's forward pass). Then {@link attach} as usual.
   */
  repack(): void {
    const n = this.#rows;
    this.begin();
    for (let r = 0; r < n; r++) this.add(this.#given[r] ?? null);
  }

  /** Sets `b`'s control arrays for the rows added: those no row uses are null. */
  attach(b: StepBatch): void {
    const any = this.#any;
    b.minP = any.minP ? this.#minP : null;
    b.presencePenalty = any.penalties ? this.#presence : null;
    b.frequencyPenalty = any.penalties ? this.#frequency : null;
    b.repetitionPenalty = any.penalties ? this.#repetition : null;
    b.penaltyStart = any.penalties ? this.#penaltyStart : null;
    b.penaltyTokenIds = any.penalties ? this.#penaltyIds.data : null;
    b.penaltyCounts = any.penalties ? this.#penaltyCounts.data : null;
    b.biasStart = any.bias ? this.#biasStart : null;
    b.biasTokenIds = any.bias ? this.#biasIds.data : null;
    b.biasValues = any.bias ? this.#biasValues.data : null;
    b.allowedStart = any.allowed ? this.#allowedStart : null;
    b.allowedTokenIds = any.allowed ? this.#allowed.data : null;
    b.bannedStart = any.banned ? this.#bannedStart : null;
    b.bannedTokenIds = any.banned ? this.#banned.data : null;
    b.scoreTokenIds = any.score ? this.#score : null;
    // A row asking for more than the limit is refused by lp_step (top_logprobs > max_top_logprobs).
    b.maxTopLogprobs = this.#maxTop;
    b.topLogprobs = this.#maxTop > 0 || this.#top.subarray(0, this.#rows).some((k) => k !== 0) ? this.#top : null;
    b.outTopTokenIds = this.#maxTop > 0 ? this.#outTopIds : null;
    b.outTopLogprobs = this.#maxTop > 0 ? this.#outTopLogprobs : null;
  }
}
