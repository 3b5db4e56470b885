/**
 * Sampling parameters of one request, their defaults and their validation.
 * @module
 */
import { checkGrammarSpec, type GrammarSpec } from "./grammar_spec.ts";

/** How one request samples and when it stops. */
export interface SamplingParams {
  /** Tokens to generate at most (default 16). */
  maxTokens: number;
  /** 0 = greedy (default 1). */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 = off. */
  topP: number;
  /** Keep the k most likely tokens; 0 or -1 = off. */
  topK: number;
  /** Per-request seed: same seed, same prompt, same output regardless of batching. */
  seed?: number;
  /** Strings that end generation (not included in the text). */
  stop: string[];
  /** Token ids that end generation (included in the token ids). */
  stopTokenIds: number[];
  /** Keep generating past EOS. */
  ignoreEos: boolean;
  /** EOS, stop tokens and stop strings end a sequence only after this many output tokens (as in vLLM). */
  minTokens: number;
  /** Return the chosen token's logprob per output token. */
  logprobs: boolean;
  /** With logprobs: the most likely alternatives per output token, 0 to {@link MAX_TOP_LOGPROBS}. */
  topLogprobs: number;
  /**
   * Also the logprob and rank of every prompt token after the first, with this many most likely
   * alternatives each (0 to {@link MAX_TOP_LOGPROBS}); absent: none. Such a request reads nothing
   * from the prefix cache (as vLLM's skip_reading_prefix_cache), so every position is computed.
   */
  promptLogprobs?: number;
  /** Leave special tokens out of the output text (default true, as vLLM). */
  skipSpecialTokens: boolean;
  /** Drops tokens less likely than minP times the most likely one (0 = off; not for greedy, as in vLLM). */
  minP: number;
  /** Subtracted from the logit of every token the output holds, in [-2, 2] (OpenAI's definition). */
  presencePenalty: number;
  /** Subtracted once per occurrence in the output, in [-2, 2]. */
  frequencyPenalty: number;
  /** Divides positive (multiplies negative) logits of tokens in the prompt or the output; > 0, 1 = off. */
  repetitionPenalty: number;
  /** [token id, bias] pairs added to the logits; biases clamped to [-100, 100] as vLLM does. */
  logitBias: Array<[number, number]>;
  /** Only these tokens may be generated (absent: any). */
  allowedTokenIds?: number[];
  /** Token sequences never completed: their last token is banned wherever the rest ends the output. */
  badWordsTokenIds: number[][];
  /** Outputs must match this constraint (a JSON schema, regex or grammar); absent: free text. */
  structuredOutput?: GrammarSpec;
}

/** Most alternatives per position (vLLM's default max_logprobs). */
export const MAX_TOP_LOGPROBS = 20;

/** Defaults as vLLM's SamplingParams has them (max_tokens 16, temperature 1). */
export const DEFAULT_SAMPLING_PARAMS: Readonly<SamplingParams> = Object.freeze({
  maxTokens: 16,
  temperature: 1,
  topP: 1,
  topK: 0,
  stop: [],
  stopTokenIds: [],
  ignoreEos: false,
  minTokens: 0,
  logprobs: false,
  topLogprobs: 0,
  skipSpecialTokens: true,
  minP: 0,
  presencePenalty: 0,
  frequencyPenalty: 0,
  repetitionPenalty: 1,
  logitBias: [],
  badWordsTokenIds: [],
});

/** A token id list entry: an integer in [0, INT32_MAX]. */
function checkTokenIds(name: keyof SamplingParams, ids: unknown): void {
  if (!Array.isArray(ids)) throw new TypeError(`${name} must be a list of token ids, got ${String(ids)}`);
  for (const t of ids) {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > INT32_MAX) {
      throw new RangeError(`${name} entries must be token ids (integers in [0, ${INT32_MAX}]), got ${String(t)}`);
    }
  }
}

/** Largest value of a C int32: integer fields travel to the native step (and its tokens) as int32. */
export const INT32_MAX = 2 ** 31 - 1;

/** Checks an integer field that must be >= min and fit an int32. */
function checkInt32(name: keyof SamplingParams, v: unknown, min: number): void {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`);
  }
  if (v > INT32_MAX) throw new RangeError(`${name} must be an integer <= ${INT32_MAX} (an int32), got ${v}`);
}

/**
 * Checks a float field the native step reads as a float32: the value must be in range both as
 * given and as rounded to float32 (1e308 is a finite double but an infinite float32; 1e-50 rounds
 * to 0). `rule` says the range in words.
 */
function checkFloat32(name: keyof SamplingParams, v: unknown, inRange: (x: number) => boolean, rule: string): void {
  if (typeof v !== "number" || !Number.isFinite(v) || !inRange(v)) {
    throw new RangeError(`${name} must be ${rule}, got ${String(v)}`);
  }
  const f = Math.fround(v);
  if (!Number.isFinite(f) || !inRange(f)) {
    throw new RangeError(`${name} must be ${rule} as a float32, got ${v} (a float32 rounds it to ${f})`);
  }
}

/**
 * Fills defaults and checks ranges; throws RangeError/TypeError naming the bad field and value
 * (every message starts with the field's name). Floats must hold as float32 and integers as int32,
 * the types the native step takes, so no value reaches the native step out of range.
 */
export function resolveSamplingParams(p: Partial<SamplingParams> = {}): SamplingParams {
  const r: SamplingParams = {
    ...DEFAULT_SAMPLING_PARAMS,
    ...p,
    stop: [...(p.stop ?? [])],
    stopTokenIds: [...(p.stopTokenIds ?? [])],
    logitBias: (p.logitBias ?? []).map(([id, bias]) => [id, bias]),
    badWordsTokenIds: (p.badWordsTokenIds ?? []).map((w) => [...w]),
  };
  if (p.allowedTokenIds !== undefined) r.allowedTokenIds = [...p.allowedTokenIds];
  checkInt32("maxTokens", r.maxTokens, 1);
  checkInt32("minTokens", r.minTokens, 0);
  checkInt32("topK", r.topK, -1);
  checkFloat32("temperature", r.temperature, (x) => x >= 0, "a finite number >= 0");
  checkFloat32("topP", r.topP, (x) => x > 0 && x <= 1, "in (0, 1]");
  // The native seed is a uint64; a JS number is exact up to 2^53.
  if (r.seed !== undefined && (!Number.isSafeInteger(r.seed) || r.seed < 0)) {
    throw new RangeError(`seed must be a non-negative safe integer, got ${String(r.seed)}`);
  }
  if (r.minTokens > r.maxTokens) {
    throw new RangeError(`minTokens (${r.minTokens}) must not exceed maxTokens (${r.maxTokens})`);
  }
  for (const s of r.stop) {
    if (typeof s !== "string" || s.length === 0) {
      throw new TypeError(`stop entries must be non-empty strings, got ${JSON.stringify(s)}`);
    }
  }
  checkTokenIds("stopTokenIds", r.stopTokenIds);
  checkInt32("topLogprobs", r.topLogprobs, 0);
  if (r.topLogprobs > MAX_TOP_LOGPROBS) {
    throw new RangeError(`topLogprobs must be at most ${MAX_TOP_LOGPROBS}, got ${r.topLogprobs}`);
  }
  if (r.promptLogprobs !== undefined) {
    checkInt32("promptLogprobs", r.promptLogprobs, 0);
    if (r.promptLogprobs > MAX_TOP_LOGPROBS) {
      throw new RangeError(`promptLogprobs must be at most ${MAX_TOP_LOGPROBS}, got ${r.promptLogprobs}`);
    }
  }
  if (typeof r.skipSpecialTokens !== "boolean") {
    throw new TypeError(`skipSpecialTokens must be a boolean, got ${String(r.skipSpecialTokens)}`);
  }
  checkFloat32("minP", r.minP, (x) => x >= 0 && x <= 1, "in [0, 1]");
  checkFloat32("presencePenalty", r.presencePenalty, (x) => x >= -2 && x <= 2, "in [-2, 2]");
  checkFloat32("frequencyPenalty", r.frequencyPenalty, (x) => x >= -2 && x <= 2, "in [-2, 2]");
  checkFloat32("repetitionPenalty", r.repetitionPenalty, (x) => x > 0, "a finite number > 0");
  for (const entry of r.logitBias) {
    const [id, bias] = entry;
    checkTokenIds("logitBias", [id]);
    if (typeof bias !== "number" || !Number.isFinite(bias)) {
      throw new RangeError(`logitBias values must be finite numbers, got ${String(bias)} for token ${id}`);
    }
    entry[1] = Math.min(100, Math.max(-100, bias));
  }
  if (r.allowedTokenIds !== undefined) {
    checkTokenIds("allowedTokenIds", r.allowedTokenIds);
    if (r.allowedTokenIds.length === 0) {
      throw new RangeError("allowedTokenIds must not be empty (leave it out for any)");
    }
  }
  if (r.structuredOutput !== undefined) {
    checkGrammarSpec(r.structuredOutput);
    const { kind, text, disableAnyWhitespace } = r.structuredOutput;
    r.structuredOutput = { kind, text, ...(disableAnyWhitespace ? { disableAnyWhitespace } : {}) };
  }
  for (const word of r.badWordsTokenIds) {
    checkTokenIds("badWordsTokenIds", word);
    if (word.length === 0) throw new RangeError("badWordsTokenIds entries must hold at least one token id");
  }
  return r;
}
