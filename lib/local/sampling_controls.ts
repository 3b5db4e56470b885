/**
 * A sequence's sampling controls for one step, as the native sampler takes them (RowControls of
 * ffi/step_controls.ts): the parameters as they are, plus two things derived from the tokens so far.
 * - Penalty entries: every distinct token of the prompt and the output with its count in the
 *   output. They are kept per sequence and extended by the tokens appended since the last step, so
 *   a step costs the new tokens plus one copy of the distinct list, never a recount of the context.
 *   The device then applies each entry once, without a vocabulary-sized count buffer per row.
 * - Banned tokens: vLLM's bad_words rule (the last token of a bad word whose other tokens end the
 *   output), evaluated on the host where the output tokens are.
 * - A structured output's mask (sequence_grammar.ts): its allowed list, intersected with
 *   allowed_token_ids, or its banned list, joined to the bad words'. The model runner may ask for
 *   a row without it and join it later, while the device runs the step's forward pass.
 * - min_tokens, as vLLM does it: until the output has that many tokens, EOS (unless ignore_eos) and
 *   the request's stop token ids are banned, so none is sampled early.
 * @module
 */
import type { RowControls } from "../../ffi/native.ts";
import { INT32_MAX, type SamplingParams } from "../core/sampling_params.ts";
import type { Sequence } from "../core/sequence.ts";
import type { TokenMask } from "../model/grammar/token_mask.ts";
import type { SequenceGrammar } from "./sequence_grammar.ts";

/** Distinct tokens of a sequence with their output counts, extended as the sequence grows. */
class PenaltyCounts {
  ids = new Int32Array(64);
  counts = new Int32Array(64);
  size = 0;
  /** Tokens of the sequence already counted. */
  seen = 0;
  readonly #at = new Map<number, number>();

  update(seq: Sequence): void {
    const tokens = seq.tokenIds, prompt = seq.numPromptTokens;
    for (; this.seen < tokens.length; this.seen++) {
      const t = tokens[this.seen]!;
      let i = this.#at.get(t);
      if (i === undefined) {
        if (this.size === this.ids.length) this.#grow();
        i = this.size++;
        this.#at.set(t, i);
        this.ids[i] = t;
        this.counts[i] = 0;
      }
      if (this.seen >= prompt) this.counts[i]!++;
    }
  }

  #grow(): void {
    const ids = new Int32Array(2 * this.ids.length), counts = new Int32Array(2 * this.ids.length);
    ids.set(this.ids);
    counts.set(this.counts);
    this.ids = ids;
    this.counts = counts;
  }
}

function hasPenalties(p: SamplingParams): boolean {
  return p.presencePenalty !== 0 || p.frequencyPenalty !== 0 || p.repetitionPenalty !== 1;
}

/** The last token of each bad word whose other tokens end `output` (vLLM's apply_bad_words). */
export function bannedByBadWords(badWords: readonly (readonly number[])[], output: readonly number[]): number[] {
  const banned: number[] = [];
  for (const word of badWords) {
    const prefix = word.length - 1;
    if (prefix > output.length) continue;
    let match = true;
    for (let j = 0; j < prefix && match; j++) match = output[output.length - prefix + j] === word[j];
    if (match) banned.push(word[prefix]!);
  }
  return banned;
}

/** `allowed` less what `mask` excludes. */
function intersect(allowed: readonly number[], mask: TokenMask): number[] {
  const set = new Set(mask.allowed ?? mask.banned);
  return allowed.filter((t) => set.has(t) === (mask.allowed !== undefined));
}

/** A constrained row whose mask is still to join its controls (see {@link SamplingControls.of}). */
export interface ConstrainedRow {
  seq: Sequence;
  /** The row's controls without the mask; {@link SamplingControls.joinMask} completes them in place. */
  controls: RowControls;
}

/** The model's EOS ids, banned while a request's min_tokens is not reached, and its vocabulary size. */
export interface StopTokens {
  eosTokenIds: readonly number[];
  vocabSize?: number;
}

/** Builds each sampling sequence's RowControls; keeps the penalty counts of the sequences it has seen. */
export class SamplingControls {
  readonly #penalties = new WeakMap<Sequence, PenaltyCounts>();
  readonly #grammarOf: (seq: Sequence) => SequenceGrammar | undefined;
  readonly #stops: StopTokens;

  /** `grammarOf`: the structured-output state of a constrained sequence; `stops`: see {@link StopTokens}. */
  constructor(
    grammarOf: (seq: Sequence) => SequenceGrammar | undefined = () => undefined,
    stops: StopTokens = { eosTokenIds: [] },
  ) {
    this.#grammarOf = grammarOf;
    this.#stops = stops;
  }

  /**
   * The tokens min_tokens bans at this step of `seq` (none once its output is long enough). An id
   * the model cannot sample (an EOS id past a small test model's vocabulary) is never banned: the
   * native step would refuse the row for it.
   */
  #minTokensBan(seq: Sequence): number[] {
    const p = seq.params;
    if (p.minTokens <= seq.numOutputTokens) return [];
    const ids = p.ignoreEos ? p.stopTokenIds : [...this.#stops.eosTokenIds, ...p.stopTokenIds];
    const vocab = this.#stops.vocabSize;
    return vocab === undefined ? ids : ids.filter((id) => id < vocab);
  }

  /** Whether a sequence's step needs any control (else its row goes without one). */
  static needed(p: SamplingParams): boolean {
    return (p.logprobs && p.topLogprobs > 0) || p.minP !== 0 || hasPenalties(p) || p.logitBias.length > 0 ||
      p.allowedTokenIds !== undefined || p.badWordsTokenIds.length > 0 || p.structuredOutput !== undefined;
  }

  /**
   * The controls of `seq`'s row this step, or null when it has none. With `deferred`, a
   * constrained sequence's mask is left out and the row is pushed there instead, for
   * {@link joinMask} to complete while the device runs the forward pass.
   */
  of(seq: Sequence, deferred?: ConstrainedRow[]): RowControls | null {
    const p = seq.params;
    const early = this.#minTokensBan(seq);
    if (!SamplingControls.needed(p) && early.length === 0) return null;
    const c: RowControls = {
      minP: p.minP,
      presencePenalty: p.presencePenalty,
      frequencyPenalty: p.frequencyPenalty,
      repetitionPenalty: p.repetitionPenalty,
      topLogprobs: p.logprobs ? p.topLogprobs : 0,
    };
    if (hasPenalties(p)) {
      let counts = this.#penalties.get(seq);
      // A sequence shorter than what was counted is not the one counted: start again.
      if (!counts || counts.seen > seq.tokenIds.length) this.#penalties.set(seq, counts = new PenaltyCounts());
      counts.update(seq);
      c.penaltyTokenIds = counts.ids.subarray(0, counts.size);
      c.penaltyCounts = counts.counts.subarray(0, counts.size);
    }
    if (p.logitBias.length > 0) c.logitBias = p.logitBias;
    if (p.allowedTokenIds !== undefined) c.allowedTokenIds = p.allowedTokenIds;
    if (p.badWordsTokenIds.length > 0) {
      const output = seq.tokenIds.length > seq.numPromptTokens ? seq.outputTokenIds : [];
      c.bannedTokenIds = bannedByBadWords(p.badWordsTokenIds, output);
    }
    if (early.length > 0) c.bannedTokenIds = c.bannedTokenIds ? [...Array.from(c.bannedTokenIds), ...early] : early;
    if (!p.structuredOutput) return c;
    if (deferred) deferred.push({ seq, controls: c });
    else this.joinMask(seq, c);
    return c;
  }

  /** Joins `seq`'s structured-output mask (none once its grammar is done) to `c`, its row's controls from {@link of}. */
  joinMask(seq: Sequence, c: RowControls): void {
    const p = seq.params;
    let mask: TokenMask | null | undefined = null;
    try {
      mask = this.#grammarOf(seq)?.mask(seq);
    } catch {
      // The engine fails a sequence whose token the grammar rejects before its next step; should
      // one get here, an id outside the vocabulary makes the native step refuse this row alone.
      mask = { allowed: new Int32Array([INT32_MAX]) };
    }
    if (mask) {
      if (p.allowedTokenIds !== undefined) {
        c.allowedTokenIds = intersect(p.allowedTokenIds, mask);
        // Nothing both allow: an out-of-vocabulary id makes the native step refuse the row.
        if (c.allowedTokenIds.length === 0) c.allowedTokenIds = [INT32_MAX];
      } else if (mask.allowed) c.allowedTokenIds = mask.allowed;
      else if (mask.banned!.length > 0) {
        c.bannedTokenIds = c.bannedTokenIds ? [...Array.from(c.bannedTokenIds), ...mask.banned!] : mask.banned;
      }
    }
  }
}
