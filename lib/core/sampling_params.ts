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
  /** EOS and stop tokens are ignored before this many tokens. */
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

/** Fills defaults and checks ranges; throws RangeError/TypeError naming the bad field and value. */
export function resolveSamplingParams(p: Partial<SamplingParams> = {}): SamplingParams {
  const r: SamplingParams = { ...DEFAULT_SAMPLING_PARAMS, ...p, stop: [...(p.stop ?? [])], stopTokenIds: [...(p.stopTokenIds ?? [])] };
  const int = (name: keyof SamplingParams, v: unknown, min: number) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${String(v)}`);
  };
  int("maxTokens", r.maxTokens, 1);
  int("minTokens", r.minTokens, 0);
  int("topK", r.topK, -1);
  if (typeof r.temperature !== "number" || !(r.temperature >= 0) || !Number.isFinite(r.temperature)) {
    throw new RangeError(`temperature must be a finite number >= 0, got ${String(r.temperature)}`);
  }
  if (typeof r.topP !== "number" || !(r.topP > 0 && r.topP <= 1)) throw new RangeError(`topP must be in (0, 1], got ${String(r.topP)}`);
  if (r.seed !== undefined && (!Number.isSafeInteger(r.seed) || r.seed < 0)) throw new RangeError(`seed must be a non-negative safe integer, got ${String(r.seed)}`);
  if (r.minTokens > r.maxTokens) throw new RangeError(`minTokens (${r.minTokens}) must not exceed maxTokens (${r.maxTokens})`);
  for (const s of r.stop) if (typeof s !== "string" || s.length === 0) throw new TypeError(`stop entries must be non-empty strings, got ${JSON.stringify(s)}`);
  for (const t of r.stopTokenIds) if (!Number.isInteger(t) || t < 0) throw new RangeError(`stopTokenIds entries must be token ids, got ${String(t)}`);
  return r;
}
