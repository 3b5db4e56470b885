/**
 * The model runner: turns a scheduled step into lp_step's flat arrays (allocated once at their
 * maximum sizes and refilled in place), makes the one native call, and hands back the sampled
 * tokens. Only sequences whose step reaches their last token get a sample row; prompt positions of
 * sequences asking for prompt logprobs get scored rows after those (prompt_logprob_rows.ts). The async form
 * launches the step and lets the caller's event loop turn until the device is done. A row the
 * native step did not sample (token -1: its sampling values are invalid, see lp_step in lmpool.h)
 * comes back with an error naming the value, so its caller fails that one sequence. Rows whose
 * requests ask for sampling controls (penalties, logit bias, allowed or bad tokens, min_p, top
 * logprobs) carry them in the same step (sampling_controls.ts builds them).
 * @module
 */
import { allocateStepBatch, type KvCache, type StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import type { TopLogprob } from "../core/outputs.ts";
import type { Sequence } from "../core/sequence.ts";
import type { StepMaskTime } from "../core/mask_time.ts";
import { type ConstrainedRow, SamplingControls, type StopTokens } from "./sampling_controls.ts";
import { PromptLogprobRows } from "./prompt_logprob_rows.ts";
import type { SequenceGrammar } from "./sequence_grammar.ts";
import type { SchedulerOutput } from "./scheduler.ts";

/**
 * What the runner needs from a model: one forward step over a batch, and optionally the step in
 * two halves (NativeModel has all of them; without the halves the async form runs `step`), whose
 * launch may leave the sampling to a later call (then a step's structured-output masks are
 * computed while the device runs its forward pass).
 */
export interface StepModel {
  step(kv: KvCache, batch: StepBatch): void;
  stepLaunch?(kv: KvCache, batch: StepBatch): void;
  stepCollect?(wait: boolean): boolean;
  /** The sampling of a step launched with `batch.deferSampling = 1`, its controls now complete. */
  stepLaunchSampling?(batch: StepBatch): void;
  /** Of the last such step, ms the device stood idle between its forward pass and the sampling's launch. */
  lastSamplingWaitMs?(): number;
  /** stepLaunch returns before the step is computed (else it computes it, as on the CPU). */
  readonly launchesAsync?: boolean;
}

/** Largest step the arrays must hold. */
export interface ModelRunnerLimits {
  maxNumTokens: number;
  maxNumSeqs: number;
  /** Blocks of the longest sequence: ceil(maxModelLen / blockSize). */
  maxBlocksPerSeq: number;
}

/** Sampled tokens of one step: row r belongs to the r-th scheduled sequence that samples. */
export interface StepResult {
  numRows: number;
  /** Row r's token, or -1 when the row was not sampled (then rowErrors has r). */
  tokens: Int32Array;
  logprobs: Float32Array;
  /**
   * Top alternatives: row r's j-th at [r * topStride + j] (token id, or -1 past the row's count, and
   * its logprob); null when no row asked for them.
   */
  topTokenIds: Int32Array | null;
  topLogprobs: Float32Array | null;
  topStride: number;
  /** Why each unsampled row was not sampled (the value at fault); empty in a normal step. */
  rowErrors: ReadonlyMap<number, RangeError>;
  /** Wall time of the native call, ms (from the launch to the collect: a deferred step's masks included). */
  nativeMs: number;
  /** The step's structured-output masks, when it had constrained rows (lib/core/mask_time.ts). */
  masks?: StepMaskTime;
}

const NO_ROW_ERRORS: ReadonlyMap<number, RangeError> = new Map();

/** Row r's top alternatives ([token id, logprob], most likely first), or undefined when it has none. */
export function topLogprobsOf(result: StepResult, r: number): TopLogprob[] | undefined {
  const { topTokenIds: ids, topLogprobs: lps, topStride: stride } = result;
  if (!ids || !lps) return undefined;
  const top: TopLogprob[] = [];
  for (let j = r * stride; j < (r + 1) * stride && ids[j]! >= 0; j++) top.push([ids[j]!, lps[j]!]);
  return top.length > 0 ? top : undefined;
}

/**
 * What is wrong with a row's sampling values as the native step reads them (float32), by the
 * rule of lp_sampling_row_ok in csrc/common/sampling_row_check.h; null when they are valid.
 */
function invalidSamplingValue(b: StepBatch, r: number): string | null {
  const temperature = b.temperature[r]!, topP = b.topP[r]!;
  if (!(temperature >= 0 && Number.isFinite(temperature))) {
    return `temperature ${temperature} (as float32) must be finite and >= 0`;
  }
  if (!(topP > 0 && topP <= 1)) return `top_p ${topP} (as float32) must be in (0, 1]`;
  const minP = b.minP?.[r] ?? 0;
  if (!(minP >= 0 && minP <= 1)) return `min_p ${minP} (as float32) must be in [0, 1]`;
  for (
    const [name, v] of [["presence_penalty", b.presencePenalty], ["frequency_penalty", b.frequencyPenalty]] as const
  ) {
    const x = v?.[r] ?? 0;
    if (!(x >= -2 && x <= 2)) return `${name} ${x} (as float32) must be in [-2, 2]`;
  }
  const rep = b.repetitionPenalty?.[r] ?? 1;
  if (!(rep > 0 && Number.isFinite(rep))) return `repetition_penalty ${rep} (as float32) must be finite and > 0`;
  return null;
}

/** Errors of the rows the native step did not sample (token -1), naming each row's bad value. */
function rowErrorsOf(b: StepBatch): ReadonlyMap<number, RangeError> {
  let errors: Map<number, RangeError> | null = null;
  for (let r = 0; r < b.numRows; r++) {
    if (b.outTokens[r]! >= 0) continue;
    const why = invalidSamplingValue(b, r) ??
      `the native step returned token ${b.outTokens[r]} for temperature ${b.temperature[r]}, top_p ${
          b.topP[r]
        }, top_k ${b.topK[r]} (a token id of allowed_token_ids, bad_words or logit_bias outside the vocabulary, ` +
        `or all of them together excluding every token)`;
    (errors ??= new Map()).set(r, new RangeError(`not sampled: ${why}`));
  }
  return errors ?? NO_ROW_ERRORS;
}

/** The sampled rows of a step that ran from `t0` until now. */
function resultOf(b: StepBatch, t0: number, masks?: StepMaskTime): StepResult {
  const nativeMs = performance.now() - t0;
  const topStride = b.maxTopLogprobs ?? 0;
  return {
    ...(masks ? { masks } : {}),
    numRows: b.numRows,
    tokens: b.outTokens,
    logprobs: b.outLogprobs,
    topTokenIds: topStride > 0 ? b.outTopTokenIds ?? null : null,
    topLogprobs: topStride > 0 ? b.outTopLogprobs ?? null : null,
    topStride,
    rowErrors: rowErrorsOf(b),
    nativeMs,
  };
}

/** Builds step batches and runs them. */
export class ModelRunner {
  readonly limits: Readonly<ModelRunnerLimits>;
  readonly #model: StepModel;
  readonly #kv: KvCache;
  readonly #blockSize: number;
  readonly #batch: StepBatch;
  readonly #controls: StepControlsWriter;
  readonly #rowControls: SamplingControls;
  readonly #grammarOf: (seq: Sequence) => SequenceGrammar | undefined;
  /** The step's constrained rows, their masks not yet joined (see {@link fill}). */
  readonly #constrained: ConstrainedRow[] = [];
  /** The step's prompt-logprob rows (scored rows after the sampled ones); read them after the step. */
  readonly promptRows: PromptLogprobRows;

  /**
   * `grammarOf`: a constrained sequence's structured-output state (its mask joins the row's
   * controls); `stops`: the model's EOS ids and vocabulary, for min_tokens (sampling_controls.ts).
   */
  constructor(
    model: StepModel,
    kv: KvCache,
    limits: ModelRunnerLimits,
    grammarOf?: (seq: Sequence) => SequenceGrammar | undefined,
    stops: StopTokens = { eosTokenIds: [] },
  ) {
    for (const k of ["maxNumTokens", "maxNumSeqs", "maxBlocksPerSeq"] as const) {
      if (!Number.isInteger(limits[k]) || limits[k] <= 0) {
        throw new RangeError(`${k} must be a positive integer, got ${limits[k]}`);
      }
    }
    this.limits = { ...limits };
    this.#model = model;
    this.#kv = kv;
    this.#blockSize = kv.blockSize;
    const { maxNumTokens, maxNumSeqs, maxBlocksPerSeq } = limits;
    this.#batch = allocateStepBatch({ tokens: maxNumTokens, seqs: maxNumSeqs, maxBlocksPerSeq });
    this.#controls = new StepControlsWriter(maxNumSeqs);
    this.#rowControls = new SamplingControls(grammarOf, stops);
    this.#grammarOf = grammarOf ?? (() => undefined);
    this.promptRows = new PromptLogprobRows(maxNumSeqs);
  }

  /** Runs one scheduled step; the result's arrays are reused by the next call. */
  execute(out: SchedulerOutput): StepResult {
    const m = this.#model;
    const b = this.fill(out, true);
    if (b.deferSampling !== 1) {
      const masks = this.#masksBeforeLaunch(b);
      const t0 = performance.now();
      m.step(this.#kv, b);
      return resultOf(b, t0, masks);
    }
    const t0 = performance.now();
    m.stepLaunch!(this.#kv, b);
    const maskMs = this.#masksDuringForward(b);
    m.stepCollect!(true);
    return resultOf(b, t0, this.#maskTime(maskMs));
  }

  /** Whether {@link executeAsync} leaves the event loop turning while the device computes. */
  get launchesAsync(): boolean {
    const m = this.#model;
    return m.stepLaunch !== undefined && m.stepCollect !== undefined && m.launchesAsync === true;
  }

  /**
   * Runs one scheduled step, awaiting `turn` (one turn of the event loop) while the device works,
   * so the caller's messages are read meanwhile. The result's arrays are reused by the next step.
   */
  async executeAsync(out: SchedulerOutput, turn: () => Promise<void>): Promise<StepResult> {
    const m = this.#model;
    if (!m.stepLaunch || !m.stepCollect) return this.execute(out);
    const b = this.fill(out, true);
    const masks = b.deferSampling === 1 ? undefined : this.#masksBeforeLaunch(b);
    const t0 = performance.now();
    m.stepLaunch(this.#kv, b);
    // No turn of the event loop before the sampling's launch (the device would wait for it): the
    // masks are prepared through promises that settle at once, not through the event loop.
    const maskMs = b.deferSampling === 1 ? await this.#preparedMasksDuringForward(b) : undefined;
    while (!m.stepCollect(false)) await turn();
    return resultOf(b, t0, maskMs === undefined ? masks : this.#maskTime(maskMs));
  }

  /** Whether the model launches a step's forward pass and its sampling apart. */
  get #defers(): boolean {
    const m = this.#model;
    return m.stepLaunch !== undefined && m.stepCollect !== undefined && m.stepLaunchSampling !== undefined;
  }

  /** Joins the constrained rows' masks to their controls and repacks them; returns the ms the masks took. */
  #joinMasks(b: StepBatch): number {
    const t = performance.now();
    for (const { seq, controls } of this.#constrained) this.#rowControls.joinMask(seq, controls);
    const maskMs = performance.now() - t;
    this.#controls.repack();
    this.#controls.attach(b);
    return maskMs;
  }

  /** A step the model cannot split: its masks go on the step's path before the launch, none hidden. */
  #masksBeforeLaunch(b: StepBatch): StepMaskTime | undefined {
    if (this.#constrained.length === 0) return undefined;
    const maskMs = this.#joinMasks(b);
    return { rows: this.#constrained.length, maskMs, hiddenMs: 0 };
  }

  /** While the device runs the launched forward pass: the masks, then the sampling's launch. */
  #masksDuringForward(b: StepBatch): number {
    const maskMs = this.#joinMasks(b);
    this.#model.stepLaunchSampling!(b);
    return maskMs;
  }

  /** As {@link #masksDuringForward}, the masks computed the fast, asynchronous way first. */
  async #preparedMasksDuringForward(b: StepBatch): Promise<number> {
    const t = performance.now();
    for (const { seq } of this.#constrained) await this.#grammarOf(seq)?.prepareMask(seq);
    const prepareMs = performance.now() - t;
    return prepareMs + this.#masksDuringForward(b);
  }

  /** A deferred step's mask time once collected: hidden is what the device did not wait for. */
  #maskTime(maskMs: number): StepMaskTime {
    const waitMs = this.#model.lastSamplingWaitMs?.() ?? maskMs;
    return { rows: this.#constrained.length, maskMs, hiddenMs: Math.max(0, maskMs - waitMs) };
  }

  /**
   * Fills the flat arrays for `out` (exposed for tests). With `deferMasks`, the structured-output
   * masks are left out of the controls (the rows wait in #constrained for #joinMasks) and, on a
   * model that splits steps, the batch is marked for a deferred sampling when any row has one.
   */
  fill(out: SchedulerOutput, deferMasks = false): StepBatch {
    const b = this.#batch;
    const bs = this.#blockSize;
    const seqs = out.scheduled;
    if (seqs.length > this.limits.maxNumSeqs) {
      throw new RangeError(`step has ${seqs.length} sequences, limit ${this.limits.maxNumSeqs}`);
    }
    if (out.numTokens > this.limits.maxNumTokens) {
      throw new RangeError(`step has ${out.numTokens} tokens, limit ${this.limits.maxNumTokens}`);
    }
    // Block-table stride of this step: the longest context in it (fewer bytes to the device).
    let stride = 1;
    for (const s of seqs) stride = Math.max(stride, Math.ceil((s.start + s.numNewTokens) / bs));
    if (stride > this.limits.maxBlocksPerSeq) {
      throw new RangeError(`a sequence needs ${stride} blocks, limit ${this.limits.maxBlocksPerSeq}`);
    }
    let t = 0;
    let r = 0;
    const controls = this.#controls;
    controls.begin();
    const constrained = this.#constrained;
    constrained.length = 0;
    for (let i = 0; i < seqs.length; i++) {
      const { seq, start, numNewTokens, sample } = seqs[i]!;
      const table = seq.blockTable;
      const ids = seq.tokenIds;
      b.queryStart[i] = t;
      const end = start + numNewTokens;
      for (let p = start; p < end; p++, t++) {
        b.tokenIds[t] = ids[p]!;
        b.positions[t] = p;
        b.slotMapping[t] = table[(p / bs) | 0]! * bs + (p % bs);
      }
      b.contextLens[i] = end;
      const nb = Math.ceil(end / bs);
      const row = i * stride;
      for (let j = 0; j < nb; j++) b.blockTables[row + j] = table[j]!;
      if (sample) {
        const sp = seq.params;
        b.sampleIndex[r] = t - 1;
        b.temperature[r] = sp.temperature;
        b.topK[r] = sp.topK > 0 ? sp.topK : 0;
        b.topP[r] = sp.topP;
        b.seed[r] = seq.seed;
        controls.add(this.#rowControls.of(seq, deferMasks ? constrained : undefined));
        r++;
      }
    }
    r = this.promptRows.add(b, seqs, r, controls);
    b.outRanks = this.promptRows.any ? this.promptRows.ranks : null;
    b.queryStart[seqs.length] = t;
    b.numSeqs = seqs.length;
    b.numTokens = t;
    b.numRows = r;
    b.maxBlocksPerSeq = stride;
    b.deferSampling = constrained.length > 0 && this.#defers ? 1 : 0;
    controls.attach(b);
    return b;
  }
}
