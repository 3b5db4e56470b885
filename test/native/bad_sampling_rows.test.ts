// A row with invalid sampling parameters (temperature NaN, infinite or negative; top_p NaN or outside
// (0, 1]) fails only itself: lp_step returns LP_OK, the row gets token -1 and logprob NaN, and every
// other row samples exactly what it samples in the same batch without the bad rows (CPU: bit-exact;
// both backends: the same batch with the bad rows made greedy, which keeps the kernels' shapes).
import { describe, expect, test } from "bun:test";
import { native, type StepBatch } from "../../ffi/native.ts";
import { createRandomModel, testSeed } from "../helpers/random_model.ts";
import { buildStep, type SampleRow } from "../helpers/step_builder.ts";

const BAD_ROWS: [string, Partial<SampleRow>][] = [
  ["temperature Infinity", { temperature: Infinity }],
  ["temperature NaN", { temperature: NaN }],
  ["top_p 0", { temperature: 1, topP: 0 }],
  ["temperature -1", { temperature: -1 }],
  ["temperature -Infinity", { temperature: -Infinity }],
  ["top_p NaN", { temperature: 0.7, topP: NaN }],
  ["top_p 1.5", { temperature: 0.7, topP: 1.5 }],
];

describe(`bad sampling rows (${native().backend} backend)`, () => {
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const { config, model } = createRandomModel(native(), {
    arch: "qwen3",
    tie: false,
    seed,
    maxNumTokens: 64,
    maxNumSeqs: 16,
  });
  const V = config.vocabSize;
  const kv = model.createKvCache(8, 16);
  const prompts = [[3, 14, 15, 92, 65], [35, 89, 79, 32, 38, 46], [26, 43, 38, 32]].map((p) => p.map((t) => t % V));
  const tables = [[1], [4], [6]];
  const last = [4, 10, 14]; // each sequence's last token index in the flattened step
  const good: SampleRow[] = [
    { token: last[0]!, temperature: 0.8, topP: 0.9, seed: 0x1234n },
    { token: last[1]!, temperature: 0 },
    { token: last[2]!, temperature: 1.3, topK: 20, seed: 0xfeedfacen },
  ];

  function prefill(rows: SampleRow[]): StepBatch {
    const b = buildStep(prompts.map((tokens, i) => ({ tokens, cached: 0, blockTable: tables[i]! })), 16, { rows });
    model.step(kv, b);
    return b;
  }

  /** The good rows with every bad row inserted after good row `at % 3`, each at that row's token. */
  function mixed(bad: Partial<SampleRow>[]): { rows: SampleRow[]; goodAt: number[]; badAt: number[] } {
    const rows: SampleRow[] = [], goodAt: number[] = [], badAt: number[] = [];
    good.forEach((g, i) => {
      goodAt.push(rows.length);
      rows.push(g);
      bad.forEach((b, k) => {
        if (k % good.length !== i) return;
        badAt.push(rows.length);
        rows.push({ token: g.token, seed: 7n, ...b });
      });
    });
    return { rows, goodAt, badAt };
  }

  function expectSkipped(b: StepBatch, badAt: number[], what: string[]): void {
    badAt.forEach((r, k) => {
      if (b.outTokens[r] !== -1) {
        throw new Error(`${ctx}: bad row ${r} (${what[k]}) sampled token ${b.outTokens[r]}, expected -1`);
      }
      expect(Number.isNaN(b.outLogprobs[r]!)).toBe(true);
    });
  }

  for (const [what, bad] of BAD_ROWS) {
    test(`one row with ${what}: LP_OK, that row -1, the others as the batch without it`, () => {
      const { rows, goodAt, badAt } = mixed([bad]);
      const withBad = prefill(rows);
      expectSkipped(withBad, badAt, [what]);
      const greedy = prefill(rows.map((r, i) => (badAt.includes(i) ? { token: r.token } : r)));
      for (const r of goodAt) {
        expect(withBad.outTokens[r]!).toBe(greedy.outTokens[r]!);
        expect(withBad.outLogprobs[r]!).toBe(greedy.outLogprobs[r]!);
      }
      if (native().backend === "cpu") {
        const alone = prefill(good);
        goodAt.forEach((r, i) => {
          expect(withBad.outTokens[r]!).toBe(alone.outTokens[i]!);
          expect(withBad.outLogprobs[r]!).toBe(alone.outLogprobs[i]!);
        });
      }
    });
  }

  test("every kind of bad row in one batch with the three good rows", () => {
    const { rows, goodAt, badAt } = mixed(BAD_ROWS.map(([, b]) => b));
    const withBad = prefill(rows);
    expectSkipped(withBad, badAt, BAD_ROWS.map(([w]) => w));
    const greedy = prefill(rows.map((r, i) => (badAt.includes(i) ? { token: r.token } : r)));
    for (const r of goodAt) expect(withBad.outTokens[r]!).toBe(greedy.outTokens[r]!);
    for (const r of goodAt) expect(withBad.outTokens[r]!).toBeGreaterThanOrEqual(0);
  });

  test("a decode step (one token per sequence, rows in order) with its middle row bad", () => {
    const first = prefill(good);
    const decode = (mid: SampleRow | Partial<SampleRow>): StepBatch => {
      const seqs = prompts.map((p, i) => ({ tokens: [first.outTokens[i]!], cached: p.length, blockTable: tables[i]! }));
      const rows: SampleRow[] = [
        { token: 0, temperature: 0.9, seed: 11n },
        { token: 1, seed: 12n, ...mid },
        { token: 2, temperature: 0 },
      ];
      const b = buildStep(seqs, 16, { rows });
      model.step(kv, b);
      return b;
    };
    const withBad = decode({ temperature: Infinity });
    expectSkipped(withBad, [1], ["temperature Infinity"]);
    const greedy = decode({ temperature: 0 });
    for (const r of [0, 2]) {
      expect(withBad.outTokens[r]!).toBe(greedy.outTokens[r]!);
      expect(withBad.outTokens[r]!).toBeGreaterThanOrEqual(0);
    }
  });

  test("the step still fails as a whole on a structural fault", () => {
    const b = buildStep([{ tokens: prompts[0]!, cached: 0, blockTable: [1] }], 16, {
      rows: [{ token: 4, temperature: Infinity }],
    });
    b.blockTables[0] = 77;
    expect(() => model.step(kv, b)).toThrow(/block id 77\b/);
  });
});
