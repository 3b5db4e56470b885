// Sampling in lp_step against the specification in lmpool.h, re-implemented here in TypeScript
// (BigInt splitmix64, float64 Gumbel noise): chosen tokens match it row for row; seeded sampling
// is reproducible whatever the batch; top_k = 1 is greedy; greedy is the argmax of out_logits;
// logprobs are log_softmax of the raw logits; frequencies follow softmax (chi-square bound).
import { describe, expect, test } from "bun:test";
import type { StepBatch } from "../../ffi/native.ts";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, testSeed } from "../helpers/random_model.ts";
import { logSoftmaxAt } from "../helpers/reference_model.ts";
import { buildStep, rowLogits, type SampleRow } from "../helpers/step_builder.ts";

const M64 = (1n << 64n) - 1n;

function mix64(z: bigint): bigint {
  z ^= z >> 30n;
  z = (z * 0xbf58476d1ce4e5b9n) & M64;
  z ^= z >> 27n;
  z = (z * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}

function argmax(x: ArrayLike<number>, keep: (i: number) => boolean = () => true): number {
  let best = -1;
  for (let i = 0; i < x.length; i++) if (keep(i) && (best < 0 || x[i]! > x[best]!)) best = i;
  return best;
}

/** Tokens the spec keeps after top-k and top-p, for z = logits / temperature. */
function keptSet(z: Float64Array, topK: number, topP: number): boolean[] {
  const V = z.length;
  const order = [...z.keys()].sort((a, b) => z[b]! - z[a]! || a - b);
  const kth = topK > 0 && topK < V ? z[order[topK - 1]!]! : -Infinity;
  const kept = Array.from(z, (v) => v >= kth);
  if (topP < 1) {
    const zMax = z[order[0]!]!;
    const e = Array.from(z, (v, i) => (kept[i] ? Math.exp(v - zMax) : 0));
    const total = e.reduce((a, b) => a + b, 0);
    let cum = 0, cutoff = 0;
    for (const i of order) {
      if (!kept[i]) continue;
      cum += e[i]!;
      cutoff = e[i]!;
      if (cum >= topP * total) break;
    }
    kept.forEach((k, i) => (kept[i] = k && e[i]! >= cutoff));
  }
  return kept;
}

/** The token lp_step must choose for one row (see the lp_step comment in lmpool.h). */
function specSample(logits: Float32Array, r: Required<SampleRow>, position: number): number {
  if (r.temperature === 0) return argmax(logits);
  const t = Math.fround(r.temperature);
  const z = Float64Array.from(logits, (l) => Math.fround(l / t));
  const kept = keptSet(z, r.topK, Math.fround(r.topP));
  const base = mix64((r.seed + 0x9e3779b97f4a7c15n * BigInt(position + 1)) & M64);
  const score = Float64Array.from(z, (v, i) => {
    const u = (Number(mix64(base ^ BigInt(i)) >> 40n) + 0.5) * 2 ** -24;
    return v - Math.log(-Math.log(u));
  });
  return argmax(score, (i) => kept[i]!);
}

function full(r: SampleRow): Required<SampleRow> {
  return { token: r.token, temperature: r.temperature ?? 0, topK: r.topK ?? 0, topP: r.topP ?? 1, seed: r.seed ?? 0n };
}

function randomSeed(rand: () => number): bigint {
  return (BigInt(Math.floor(rand() * 2 ** 32)) << 32n) | BigInt(Math.floor(rand() * 2 ** 32));
}

describe(`sampling (${native().backend} backend)`, () => {
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const rand = rng(seed ^ 0x5a3);
  const { config, model } = createRandomModel(native(), { arch: "qwen3", tie: false, seed, maxNumSeqs: 4096 });
  const V = config.vocabSize;
  const kv = model.createKvCache(16, 16);
  const prompts = [0, 1, 2].map(() => Array.from({ length: 9 }, () => Math.floor(rand() * V)));
  const tables = [[0], [1], [2]];

  /** One prefill of the given sequences (indices into prompts) with the given rows. */
  function run(seqIdx: number[], rows: SampleRow[]): StepBatch {
    const b = buildStep(seqIdx.map((s) => ({ tokens: prompts[s]!, cached: 0, blockTable: tables[s]! })), 16, {
      rows,
      vocab: V,
    });
    model.step(kv, b);
    return b;
  }

  test("chosen tokens follow the specification; logprobs are log_softmax of the raw logits", () => {
    const rows: SampleRow[] = [];
    for (const temperature of [0, 0.5, 1, 1.7]) {
      for (const topK of [0, 1, 5, 40]) {
        for (const topP of [1, 0.9, 0.4]) {
          for (let k = 0; k < 3; k++) rows.push({ token: 8 + 9 * k, temperature, topK, topP, seed: randomSeed(rand) });
        }
      }
    }
    const b = run([0, 1, 2], rows);
    rows.forEach((r, i) => {
      const logits = rowLogits(b, i, V);
      const want = specSample(logits, full(r), b.positions[r.token]!);
      if (b.outTokens[i] !== want) {
        throw new Error(
          `${ctx}: row ${i} ${JSON.stringify({ ...r, seed: String(r.seed) })}: got ${
            b.outTokens[i]
          }, spec says ${want}`,
        );
      }
      const lp = logSoftmaxAt(logits, want);
      if (!(Math.abs(b.outLogprobs[i]! - lp) <= 1e-5 * (1 + Math.abs(lp)))) {
        throw new Error(`${ctx}: row ${i}: logprob ${b.outLogprobs[i]} vs ${lp}`);
      }
    });
    expect(rows.length).toBe(144);
  });

  test("a larger vocabulary (top_k above 1024 selects differently) follows the specification", () => {
    const big = createRandomModel(native(), {
      arch: "llama",
      tie: true,
      seed,
      vocabSize: 3000,
      logitScale: 6,
      maxNumSeqs: 128,
    });
    using bigKv = big.model.createKvCache(2, 16);
    // A high temperature flattens the distribution, so the kept set decides the winner.
    const configs = [[0, 1, 0.9], [7, 0.95, 0.9], [1500, 1, 20], [2999, 1, 20], [0, 0.6, 20], [2000, 0.8, 20]] as const;
    const rows: SampleRow[] = configs.flatMap(([topK, topP, temperature]) =>
      Array.from({ length: 12 }, () => ({ token: 8, temperature, topK, topP, seed: randomSeed(rand) }))
    );
    const b = buildStep([{ tokens: prompts[0]!, cached: 0, blockTable: [1] }], 16, { rows, vocab: 3000 });
    big.model.step(bigKv, b);
    rows.forEach((r, i) => {
      const want = specSample(rowLogits(b, i, 3000), full(r), 8);
      if (b.outTokens[i] !== want) {
        throw new Error(
          `${ctx}: vocab 3000 row ${i} (top_k ${r.topK}, top_p ${r.topP}): got ${b.outTokens[i]}, spec says ${want}`,
        );
      }
    });
    big.model.dispose();
  });

  test("greedy is argmax of out_logits and top_k = 1 equals greedy", () => {
    const rows: SampleRow[] = [];
    for (let s = 0; s < 3; s++) {
      rows.push({ token: 8 + 9 * s });
      for (const temperature of [0.3, 1, 2]) {
        rows.push({ token: 8 + 9 * s, temperature, topK: 1, seed: randomSeed(rand) });
      }
    }
    const b = run([0, 1, 2], rows);
    for (let s = 0; s < 3; s++) {
      const greedy = b.outTokens[4 * s]!;
      expect(greedy).toBe(argmax(rowLogits(b, 4 * s, V)));
      for (let k = 1; k <= 3; k++) expect(b.outTokens[4 * s + k]!).toBe(greedy);
    }
  });

  test("same seed and position give the same token whatever the batch; other seeds differ", () => {
    const seeds = [0, 1, 2].map(() => randomSeed(rand));
    const row = (s: number, at: number): SampleRow => ({ token: at, temperature: 1, topP: 0.95, seed: seeds[s]! });
    const alone = [0, 1, 2].map((s) => run([s], [row(s, 8)]).outTokens[0]!);
    const batched = run([2, 0, 1], [row(1, 26), row(2, 8), row(0, 17)]).outTokens;
    expect([batched[2], batched[0], batched[1]]).toEqual(alone);
    // A different seed at the same position: over many seeds, many different tokens.
    const many = Array.from({ length: 200 }, (_, i) => ({ token: 8, temperature: 1, seed: BigInt(i) * 7919n }));
    const distinct = new Set(run([0], many).outTokens).size;
    if (!(distinct >= 10)) throw new Error(`${ctx}: 200 seeds gave only ${distinct} distinct tokens`);
  });

  for (const [topK, topP] of [[0, 1], [5, 1], [0, 0.7]] as const) {
    test(`frequencies follow the softmax (top_k ${topK}, top_p ${topP})`, () => {
      const n = 4000, temperature = 1.3;
      const base = randomSeed(rand);
      const rows = Array.from(
        { length: n },
        (_, i) => ({ token: 8, temperature, topK, topP, seed: (base + BigInt(i)) & M64 }),
      );
      const b = run([0], rows);
      const z = Float64Array.from(rowLogits(b, 0, V), (l) => Math.fround(l / Math.fround(temperature)));
      const kept = keptSet(z, topK, topP);
      const e = Array.from(z, (v, i) => (kept[i] ? Math.exp(v) : 0));
      const total = e.reduce((a, c) => a + c, 0);
      const counts = new Array<number>(V).fill(0);
      for (const t of b.outTokens) counts[t]!++;
      counts.forEach((c, i) => {
        if (c > 0 && !kept[i]) throw new Error(`${ctx}: token ${i} sampled ${c} times but is outside top-k/top-p`);
      });
      // Chi-square over bins expecting >= 5 samples, the rest pooled.
      let chi2 = 0, bins = 0, poolObs = 0, poolExp = 0;
      counts.forEach((c, i) => {
        const expected = (n * e[i]!) / total;
        if (expected >= 5) {
          chi2 += (c - expected) ** 2 / expected;
          bins++;
        } else {
          poolObs += c;
          poolExp += expected;
        }
      });
      if (poolExp > 0) chi2 += (poolObs - poolExp) ** 2 / Math.max(poolExp, 1), bins++;
      const df = Math.max(1, bins - 1);
      const bound = df + 6 * Math.sqrt(2 * df) + 10;
      if (!(chi2 <= bound)) {
        throw new Error(`${ctx}: chi-square ${chi2.toFixed(1)} over ${bins} bins exceeds ${bound.toFixed(1)}`);
      }
    });
  }
});
