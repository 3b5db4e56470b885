/**
 * How many tokens a step may compute and still end within a target time, learned from the
 * worker's own measured steps. A step holds its thread (on the CPU backend the whole step runs in
 * the FFI call), so one long prefill would stall everything else on that thread, heartbeats
 * included; capping each step's predicted time keeps every step short on any backend, while on a
 * fast device the cap sits far above the configured token budget and never binds.
 *
 * Cost model: ms = a * tokens + b * pairs, where `pairs` counts (query, key) pairs of causal
 * attention: a chunk of n tokens starting at position s attends over n*s + n(n+1)/2 pairs, so the
 * cost of prefill grows with the context it attends over. The coefficients are fitted online by
 * non-negative least squares over exponentially forgotten statistics, so they follow the machine
 * when it gets slower or faster. There is no constant term on purpose: the budget steers steps to
 * the target, so the measured steps cluster there, where a constant explains them as well as the
 * slopes do; a fitted constant near the target would predict that even a tiny step takes it, and
 * the budget would collapse to the floor. Without it the per-step overhead is folded into the
 * slopes, which overstates small steps (harmless) and is exact near the target.
 *
 * Extrapolation is where a linear fit is least trustworthy, so a step may also compute at most
 * `growth` times the tokens and the attention pairs of the largest step measured so far (before
 * any measurement: `initialTokens` from position 0). A fresh worker therefore starts small and
 * doubles its steps until the fitted cost, not the cap, is what binds.
 * @module
 */
import { chunkPairs } from "../core/attention_pairs.ts";

export { chunkPairs };

/** The work of a step (or of part of it). */
export interface StepShape {
  /** Tokens computed. */
  tokens: number;
  /** Causal attention (query, key) pairs: see {@link chunkPairs}. */
  pairs: number;
}

/** Options of a {@link StepBudget}. */
export interface StepBudgetOptions {
  /** Predicted step time to stay under, ms (default {@link DEFAULT_STEP_TARGET_MS}). */
  targetMs?: number;
  /** Prefill tokens a step may always take, however slow (default 16). */
  floorTokens?: number;
  /** Tokens of the first step, before anything was measured (default 64). */
  initialTokens?: number;
  /** How far past the largest measured step (tokens and pairs) a step may go (default 2). */
  growth?: number;
  /**
   * Weight of a new measurement in the fit (0 < alpha <= 1; default 0.1, about the last 10 steps;
   * a step that ran well over its prediction also rescales the past ones: see SLOWDOWN_RATIO).
   */
  alpha?: number;
}

/**
 * Default target: half of the about one second no step may exceed, so a prediction off by 2x
 * still stays under it.
 */
export const DEFAULT_STEP_TARGET_MS = 500;

// A step that ran this much over its prediction means the machine got slower (another process took
// the cores, say). One measurement cannot tell which coefficient changed, and forgetting alone
// follows a slowdown over several overshooting steps, so the past measurements are rescaled to the
// new speed at once (all of them taking ratio times longer), by at most MAX_RESCALE per step so one
// stall does not shrink the budget for long. A machine that got faster is followed at the normal
// pace: an overshoot is what the budget exists to prevent, an undershoot only costs a few steps.
const SLOWDOWN_RATIO = 1.1;
const MAX_RESCALE = 3;
// Features are scaled to comparable magnitudes before fitting: [tokens / 1e3, pairs / 1e6].
const TOKEN_SCALE = 1e3;
const PAIR_SCALE = 1e6;
// Non-negative least squares by trying the feasible subsets of [tokens, pairs]. On a tie (one
// measurement fits either way exactly) the earlier subset wins: pairs alone before tokens alone,
// as it predicts more for long contexts.
const SUBSETS: readonly (readonly number[])[] = [[0, 1], [1], [0]];

/** The per-step token budget that follows measured step cost (see the module doc). */
export class StepBudget {
  readonly targetMs: number;
  readonly floorTokens: number;
  readonly initialTokens: number;
  readonly growth: number;
  readonly #alpha: number;
  // Forgotten sums of x x^T, x y and y^2 over measurements, x = scaled features.
  readonly #xx = [0, 0, 0, 0];
  readonly #xy = [0, 0];
  #yy = 0;
  #measured = 0;
  #maxTokens = 0;
  #maxPairs = 0;
  /** [a ms/token, b ms/pair]; null before any measurement. */
  #coef: [number, number] | null = null;

  constructor(o: StepBudgetOptions = {}) {
    const targetMs = o.targetMs ?? DEFAULT_STEP_TARGET_MS;
    if (!(Number.isFinite(targetMs) && targetMs > 0)) {
      throw new RangeError(`stepTargetMs must be a positive number of ms, got ${targetMs}`);
    }
    const floorTokens = o.floorTokens ?? 16;
    const initialTokens = o.initialTokens ?? 64;
    for (const [k, v] of Object.entries({ floorTokens, initialTokens })) {
      if (!Number.isInteger(v) || v <= 0) throw new RangeError(`step budget ${k} must be a positive integer, got ${v}`);
    }
    const growth = o.growth ?? 2;
    if (!(Number.isFinite(growth) && growth > 1)) {
      throw new RangeError(`step budget growth must be a number > 1, got ${growth}`);
    }
    const alpha = o.alpha ?? 0.1;
    if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`step budget alpha must be in (0, 1], got ${alpha}`);
    this.targetMs = targetMs;
    this.floorTokens = floorTokens;
    this.initialTokens = initialTokens;
    this.growth = growth;
    this.#alpha = alpha;
  }

  /** Steps measured so far. */
  get numMeasured(): number {
    return this.#measured;
  }

  /** Fitted [ms per token, ms per attention pair]; null before any measurement. */
  get coefficients(): readonly [number, number] | null {
    return this.#coef;
  }

  /** Folds in one measured step: its shape and its wall time in ms. */
  observe(shape: StepShape, ms: number): void {
    if (!(Number.isFinite(ms) && ms >= 0)) throw new RangeError(`step time must be a finite ms >= 0, got ${ms}`);
    if (!(shape.tokens > 0 && shape.pairs >= 0)) {
      throw new RangeError(`a measured step must compute tokens, got ${JSON.stringify(shape)}`);
    }
    const x = [shape.tokens / TOKEN_SCALE, shape.pairs / PAIR_SCALE];
    const predicted = this.predictMs(shape);
    let y = ms;
    if (predicted !== null && predicted > 0 && ms > SLOWDOWN_RATIO * predicted) {
      const r = Math.min(ms / predicted, MAX_RESCALE);
      for (let i = 0; i < 2; i++) this.#xy[i] = this.#xy[i]! * r;
      this.#yy *= r * r;
      y = predicted * r; // a stall counts as the capped slowdown, not as a measurement of its own
    }
    const keep = this.#measured === 0 ? 0 : 1 - this.#alpha;
    for (let i = 0; i < 2; i++) {
      for (let j = 0; j < 2; j++) this.#xx[i * 2 + j] = keep * this.#xx[i * 2 + j]! + x[i]! * x[j]!;
      this.#xy[i] = keep * this.#xy[i]! + x[i]! * y;
    }
    this.#yy = keep * this.#yy + y * y;
    this.#measured++;
    this.#maxTokens = Math.max(this.#maxTokens, shape.tokens);
    this.#maxPairs = Math.max(this.#maxPairs, shape.pairs);
    this.#coef = this.#fit();
  }

  /** Predicted wall time of a step of this shape, ms; null before any measurement. */
  predictMs(shape: StepShape): number | null {
    const k = this.#coef;
    return k ? k[0] * shape.tokens + k[1] * shape.pairs : null;
  }

  /**
   * The most tokens of one sequence, starting at position `start`, that may join a step that
   * already computes `acc`: the step's predicted time stays under the target and it stays within
   * the growth caps. May be 0, or Infinity when nothing limits it (the caller caps it with its own
   * budget); the caller applies {@link floorTokens}.
   */
  maxNewTokens(acc: StepShape, start: number): number {
    const tokenCap = this.#measured === 0 ? this.initialTokens : this.growth * this.#maxTokens;
    const pairCap = this.#measured === 0 ? chunkPairs(0, this.initialTokens) : this.growth * this.#maxPairs;
    let n = Math.min(tokenCap - acc.tokens, maxChunk(0, 1, pairCap - acc.pairs, start));
    const k = this.#coef;
    if (k) n = Math.min(n, maxChunk(k[0], k[1], this.targetMs - k[0] * acc.tokens - k[1] * acc.pairs, start));
    return Math.max(0, n);
  }

  /** Tokens an empty step may take for a prompt starting at `start` (for stats). */
  tokensAt(start = 0): number {
    return this.maxNewTokens({ tokens: 0, pairs: 0 }, start);
  }

  #fit(): [number, number] {
    let best: [number, number] = [0, 0];
    let bestSse = Infinity;
    const tol = 1e-9 * (this.#yy + 1);
    for (const idx of SUBSETS) {
      const beta = solve(idx.map((i) => idx.map((j) => this.#xx[i * 2 + j]!)), idx.map((i) => this.#xy[i]!));
      if (!beta || beta.some((v) => v < 0)) continue;
      const full: [number, number] = [0, 0];
      idx.forEach((i, r) => (full[i] = beta[r]!));
      let sse = this.#yy;
      for (let i = 0; i < 2; i++) {
        sse -= 2 * full[i]! * this.#xy[i]!;
        for (let j = 0; j < 2; j++) sse += full[i]! * this.#xx[i * 2 + j]! * full[j]!;
      }
      if (sse < bestSse - tol) {
        best = full;
        bestSse = sse;
      }
    }
    return [best[0] / TOKEN_SCALE, best[1] / PAIR_SCALE];
  }
}

/**
 * The largest n >= 0 with a*n + b*chunkPairs(start, n) <= room (a, b >= 0), rounded down;
 * Infinity when a and b are both 0 and room >= 0.
 */
function maxChunk(a: number, b: number, room: number, start: number): number {
  if (room < 0) return 0;
  // (b/2) n^2 + (a + b (start + 1/2)) n - room <= 0
  const lin = a + b * (start + 0.5);
  if (b > 0) return Math.floor((-lin + Math.sqrt(lin * lin + 2 * b * room)) / b);
  if (lin > 0) return Math.floor(room / lin);
  return Infinity;
}

/** Solves m x = v by Gaussian elimination with partial pivoting; null when m is (nearly) singular. */
function solve(m: number[][], v: number[]): number[] | null {
  const n = v.length;
  const scale = Math.max(...m.map((row, i) => Math.abs(row[i]!)));
  if (!(scale > 0)) return null;
  const a = m.map((row, i) => [...row, v[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(a[r]![c]!) > Math.abs(a[p]![c]!)) p = r;
    if (Math.abs(a[p]![c]!) < 1e-10 * scale) return null;
    [a[c], a[p]] = [a[p]!, a[c]!];
    for (let r = c + 1; r < n; r++) {
      const f = a[r]![c]! / a[c]![c]!;
      for (let k = c; k <= n; k++) a[r]![k] = a[r]![k]! - f * a[c]![k]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = a[r]![n]!;
    for (let k = r + 1; k < n; k++) s -= a[r]![k]! * x[k]!;
    x[r] = s / a[r]![r]!;
  }
  return x;
}
