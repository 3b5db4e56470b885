// StepBudget: the per-step token budget learned from measured step times. Steps are made up by a
// known cost model (ms = c + a * tokens + b * attention pairs), so the fit, the budget it gives,
// its clamps and how it follows a machine that gets slower or faster can be checked exactly.
import { describe, expect, test } from "bun:test";
import { chunkPairs, DEFAULT_STEP_TARGET_MS, StepBudget, type StepShape } from "../../../lib/local/step_budget.ts";

/** A made-up machine: ms of a step of this shape. */
type Machine = (s: StepShape) => number;
const linear = (c: number, a: number, b: number): Machine => (s) => c + a * s.tokens + b * s.pairs;
// About the demo model on the CPU backend: 7000 tokens in one step take ~12 s.
const cpu = linear(2, 0.1, 0.0005);
// About an H200: 8192 tokens from position 0 in ~30 ms.
const gpu = linear(3, 0.003, 1e-7);

/** Prefills a prompt of `len` tokens alone, one chunk per step as the budget allows; returns the chunks. */
function prefill(
  budget: StepBudget,
  machine: Machine,
  len: number,
  maxBatched = 8192,
): { chunks: number[]; ms: number[] } {
  const chunks: number[] = [];
  const ms: number[] = [];
  for (let start = 0; start < len;) {
    const n = Math.min(
      len - start,
      maxBatched,
      Math.max(budget.floorTokens, budget.maxNewTokens({ tokens: 0, pairs: 0 }, start)),
    );
    const shape = { tokens: n, pairs: chunkPairs(start, n) };
    const t = machine(shape);
    budget.observe(shape, t);
    chunks.push(n);
    ms.push(t);
    start += n;
  }
  return { chunks, ms };
}

describe("attention pairs", () => {
  test("a chunk attends causally over its context and itself", () => {
    expect(chunkPairs(0, 1)).toBe(1);
    expect(chunkPairs(0, 4)).toBe(1 + 2 + 3 + 4);
    expect(chunkPairs(10, 3)).toBe(11 + 12 + 13);
    expect(chunkPairs(0, 6)).toBe(chunkPairs(0, 2) + chunkPairs(2, 4));
  });
});

describe("before any measurement", () => {
  test("the first step is small: initialTokens from position 0, fewer where the context is long", () => {
    const b = new StepBudget();
    expect(b.targetMs).toBe(DEFAULT_STEP_TARGET_MS);
    expect(b.coefficients).toBeNull();
    expect(b.predictMs({ tokens: 10, pairs: 55 })).toBeNull();
    expect(b.tokensAt(0)).toBe(64);
    expect(b.tokensAt(1000)).toBeLessThan(3);
    expect(new StepBudget({ initialTokens: 128 }).tokensAt(0)).toBe(128);
  });

  test("bad options are RangeErrors naming the option and value", () => {
    expect(() => new StepBudget({ targetMs: 0 })).toThrow(/stepTargetMs must be a positive number of ms, got 0/);
    expect(() => new StepBudget({ targetMs: Number.NaN })).toThrow(/stepTargetMs .* got NaN/);
    expect(() => new StepBudget({ floorTokens: 1.5 })).toThrow(/floorTokens must be a positive integer, got 1.5/);
    expect(() => new StepBudget({ initialTokens: 0 })).toThrow(/initialTokens must be a positive integer, got 0/);
    expect(() => new StepBudget({ growth: 1 })).toThrow(/growth must be a number > 1, got 1/);
    expect(() => new StepBudget({ alpha: 2 })).toThrow(/alpha must be in \(0, 1\], got 2/);
    expect(() => new StepBudget().observe({ tokens: 4, pairs: 10 }, -1)).toThrow(/finite ms >= 0, got -1/);
    expect(() => new StepBudget().observe({ tokens: 0, pairs: 0 }, 1)).toThrow(/must compute tokens/);
  });
});

describe("fit", () => {
  const shapes = [[0, 64], [64, 128], [192, 256], [448, 512], [0, 300], [2000, 100], [5000, 40]].map(([start, n]) => ({
    tokens: n!,
    pairs: chunkPairs(start!, n!),
  }));

  test("recovers the cost per token and per attention pair from steps of varied shapes", () => {
    const b = new StepBudget();
    const machine = linear(0, 0.1, 0.0005);
    for (const s of shapes) b.observe(s, machine(s));
    const [a, k] = b.coefficients!;
    expect(a).toBeCloseTo(0.1, 5);
    expect(k).toBeCloseTo(0.0005, 8);
    expect(b.predictMs({ tokens: 1000, pairs: 1e6 })).toBeCloseTo(machine({ tokens: 1000, pairs: 1e6 }), 3);
  });

  test("a per-step overhead is folded into the slopes: close for steps near the target, never under for small ones", () => {
    const b = new StepBudget();
    for (const s of shapes) b.observe(s, cpu(s));
    const near = { tokens: 300, pairs: chunkPairs(1000, 300) };
    expect(Math.abs(b.predictMs(near)! / cpu(near) - 1)).toBeLessThan(0.05);
  });

  test("steps measured at 0 ms (a coarse clock) do not stick: the next real measurement is fitted", () => {
    const b = new StepBudget();
    b.observe({ tokens: 64, pairs: chunkPairs(0, 64) }, 0);
    expect(b.predictMs({ tokens: 64, pairs: 0 })).toBe(0);
    b.observe({ tokens: 128, pairs: chunkPairs(64, 128) }, 100);
    expect(b.predictMs({ tokens: 128, pairs: chunkPairs(64, 128) })!).toBeGreaterThan(50);
  });

  test("coefficients never go negative, even when the data would prefer it", () => {
    const b = new StepBudget();
    // Bigger steps measured faster (noise): an unconstrained fit would give negative slopes.
    for (const [n, ms] of [[64, 40], [128, 30], [256, 20], [64, 40]] as const) {
      b.observe({ tokens: n, pairs: chunkPairs(0, n) }, ms);
    }
    for (const v of b.coefficients!) expect(v).toBeGreaterThanOrEqual(0);
  });
});

describe("budget", () => {
  test("a slow machine: the prompt is chunked, chunks shrink as the context grows, every step stays under the target", () => {
    const b = new StepBudget();
    const { chunks, ms } = prefill(b, cpu, 7000);
    // Growth from the first, small step: each step at most doubles the largest one's attention pairs.
    expect(chunks[0]).toBe(64);
    let start = 0;
    let maxPairs = 0;
    for (const n of chunks) {
      const pairs = chunkPairs(start, n);
      if (maxPairs > 0) expect(pairs).toBeLessThanOrEqual(2 * maxPairs);
      maxPairs = Math.max(maxPairs, pairs);
      start += n;
    }
    expect(chunks.length).toBeGreaterThan(10);
    expect(Math.max(...ms)).toBeLessThanOrEqual(b.targetMs * 1.02); // the 2 ms per step folded into the slopes
    const peak = chunks.indexOf(Math.max(...chunks));
    expect(chunks.at(-2)!).toBeLessThan(chunks[peak]!); // the long context costs more per token
    // The budget an empty step gets is the largest token count predicted to fit the target.
    const n = b.tokensAt(3000);
    const predicted = (k: number) => b.predictMs({ tokens: k, pairs: chunkPairs(3000, k) })!;
    expect(predicted(n)).toBeLessThanOrEqual(b.targetMs);
    expect(predicted(n + 1)).toBeGreaterThan(b.targetMs);
    expect(Math.abs(cpu({ tokens: n, pairs: chunkPairs(3000, n) }) / b.targetMs - 1)).toBeLessThan(0.02);
  });

  test("a fast machine: after a short ramp the budget does not bind below 8192 tokens", () => {
    const b = new StepBudget();
    const first = prefill(b, gpu, 16384);
    expect(first.chunks[0]).toBe(64);
    expect(first.chunks.length).toBeLessThan(20);
    const again = prefill(b, gpu, 8192);
    expect(again.chunks).toEqual([8192]);
    expect(b.tokensAt(0)).toBeGreaterThanOrEqual(8192);
  });

  test("one stall on a fast machine shrinks the budget at most 3-fold, so it still does not bind", () => {
    const b = new StepBudget();
    prefill(b, gpu, 16384);
    prefill(b, gpu, 8192);
    const shape = { tokens: 8192, pairs: chunkPairs(0, 8192) };
    b.observe(shape, 100 * gpu(shape));
    expect(b.tokensAt(0)).toBeGreaterThanOrEqual(8192);
    expect(b.predictMs(shape)!).toBeLessThan(4 * gpu(shape));
  });

  test("steps already in the batch count: the room left shrinks, and is 0 once the target is spent", () => {
    const b = new StepBudget();
    prefill(b, cpu, 3000);
    const alone = b.maxNewTokens({ tokens: 0, pairs: 0 }, 100);
    const decodes = { tokens: 32, pairs: 32 * 2000 };
    const withDecodes = b.maxNewTokens(decodes, 100);
    expect(withDecodes).toBeLessThan(alone);
    expect(cpu({ tokens: decodes.tokens + withDecodes, pairs: decodes.pairs + chunkPairs(100, withDecodes) }))
      .toBeLessThanOrEqual(b.targetMs);
    expect(b.maxNewTokens({ tokens: 64, pairs: 1e7 }, 100)).toBe(0);
  });

  test("never past growth times the largest measured step, in tokens and in attention pairs", () => {
    const b = new StepBudget({ growth: 2 });
    b.observe({ tokens: 100, pairs: chunkPairs(0, 100) }, 1); // cheap: the fit alone would allow far more
    expect(b.tokensAt(0)).toBe(141); // pairs: 141*142/2 <= 2 * 5050 < 142*143/2
    b.observe({ tokens: 1000, pairs: 1000 }, 1); // many tokens, little attention (decode-like)
    expect(b.maxNewTokens({ tokens: 1900, pairs: 0 }, 0)).toBe(100);
  });

  test("follows the machine: slower steps cut the budget, faster ones grow it back", () => {
    const b = new StepBudget();
    prefill(b, cpu, 4000);
    const before = b.tokensAt(1000);
    const slow = linear(6, 0.3, 0.0015); // 3x slower (another process took the cores)
    const slowed = prefill(b, slow, 4000);
    const during = b.tokensAt(1000);
    expect(during).toBeLessThan(before * 0.6);
    // Only the first step after the change overshoots (by about the slowdown): the past steps are
    // rescaled to the new speed at once.
    expect(slowed.ms[0]).toBeGreaterThan(b.targetMs * 2);
    expect(Math.max(...slowed.ms.slice(1))).toBeLessThan(b.targetMs * 1.1);
    prefill(b, cpu, 4000);
    prefill(b, cpu, 4000);
    expect(b.tokensAt(1000)).toBeGreaterThan(before * 0.9);
  });
});
