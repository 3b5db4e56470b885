/**
 * Sampling parameters of one request, their defaults and their validation.
 * @module
 */

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
}

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
});

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
  };
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
  for (const t of r.stopTokenIds) {
    if (typeof t !== "number" || !Number.isInteger(t) || t < 0 || t > INT32_MAX) {
      throw new RangeError(`stopTokenIds entries must be token ids (integers in [0, ${INT32_MAX}]), got ${String(t)}`);
    }
  }
  return r;
}
