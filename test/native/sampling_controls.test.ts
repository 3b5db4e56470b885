// lp_step's sampling controls (lmpool.h) against a TypeScript reference of vLLM's formulas: allowed
// tokens, banned tokens, logit bias, repetition / frequency / presence penalties (float32 arithmetic
// as the native code does it), min_p; top logprobs from the raw log_softmax; scored rows. Rows with
// and without controls run in one step; a bad value fails its row only.
import { describe, expect, test } from "bun:test";
import { native, type RowControls, type StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, testSeed } from "../helpers/random_model.ts";
import { buildStep, rowLogits, type SampleRow } from "../helpers/step_builder.ts";

const f32 = Math.fround;

/** vLLM's processing of one row (allowed, banned, bias, penalties), in float32. */
function processLogits(raw: Float32Array, c: RowControls): Float32Array {
  const l = Float32Array.from(raw);
  if (c.allowedTokenIds && c.allowedTokenIds.length > 0) {
    l.fill(-Infinity);
    for (const id of Array.from(c.allowedTokenIds)) l[id] = raw[id]!;
  }
  for (const id of Array.from(c.bannedTokenIds ?? [])) l[id] = -Infinity;
  for (const [id, b] of c.logitBias ?? []) l[id] = f32(l[id]! + f32(b));
  const rep = f32(c.repetitionPenalty ?? 1), freq = f32(c.frequencyPenalty ?? 0), pres = f32(c.presencePenalty ?? 0);
  const ids = Array.from(c.penaltyTokenIds ?? []), counts = Array.from(c.penaltyCounts ?? []);
  ids.forEach((id, j) => {
    let v = l[id]!;
    v = v > 0 ? f32(v / rep) : f32(v * rep);
    v = f32(v - f32(freq * counts[j]!));
    v = f32(v - f32(pres * (counts[j]! > 0 ? 1 : 0)));
    l[id] = v;
  });
  return l;
}

function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** log_softmax(raw) in float64, the values the native top logprobs approximate. */
function logSoftmax(raw: Float32Array): Float64Array {
  let mx = -Infinity;
  for (const v of raw) mx = Math.max(mx, v);
  let s = 0;
  for (const v of raw) s += Math.exp(v - mx);
  return Float64Array.from(raw, (v) => v - mx - Math.log(s));
}

describe(`sampling controls (${native().backend} backend)`, () => {
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const rand = rng(seed ^ 0x7c1);
  const { config, model } = createRandomModel(native(), { arch: "qwen3", tie: false, seed, maxNumSeqs: 64 });
  const V = config.vocabSize;
  const kv = model.createKvCache(8, 16);
  const prompt = Array.from({ length: 7 }, () => Math.floor(rand() * V));
  const writer = new StepControlsWriter(64);

  /** One prefill of `prompt`; every row samples its last token with its own controls. */
  function run(rows: { row: Omit<SampleRow, "token">; controls: RowControls | null }[]): StepBatch {
    const b = buildStep([{ tokens: prompt, cached: 0, blockTable: [2] }], 16, {
      rows: rows.map((r) => ({ token: prompt.length - 1, ...r.row })),
      vocab: V,
    });
    writer.begin();
    for (const r of rows) writer.add(r.controls);
    writer.attach(b);
    model.step(kv, b);
    return b;
  }

  const raw = (() => rowLogits(run([{ row: {}, controls: null }]), 0, V).slice())();
  const order = [...raw.keys()].sort((a, b) => raw[b]! - raw[a]! || a - b);
  const greedy = order[0]!;

  test("each control, on a greedy row, picks the argmax of the reference's processed logits", () => {
    const cases: RowControls[] = [
      { allowedTokenIds: [order[7]!, order[3]!, order[50]!] },
      { bannedTokenIds: [order[0]!, order[1]!] },
      { logitBias: [[order[40]!, 30], [greedy, -5]] },
      { repetitionPenalty: 1.7, penaltyTokenIds: order.slice(0, 4), penaltyCounts: [0, 2, 1, 0] },
      { frequencyPenalty: 1.5, penaltyTokenIds: order.slice(0, 3), penaltyCounts: [3, 1, 0] },
      { presencePenalty: 2, penaltyTokenIds: order.slice(0, 3), penaltyCounts: [1, 1, 0] },
      {
        repetitionPenalty: 0.6,
        frequencyPenalty: -0.5,
        presencePenalty: 0.75,
        penaltyTokenIds: order.slice(2, 9),
        penaltyCounts: [1, 0, 4, 2, 0, 1, 3],
        logitBias: [[order[5]!, 0.5]],
        bannedTokenIds: [greedy],
      },
    ];
    // A control-free greedy row between each pair: rows with and without controls share the step.
    const rows = cases.flatMap((c) => [{ row: {}, controls: c }, { row: {}, controls: null }]);
    const b = run(rows);
    cases.forEach((c, i) => {
      const want = argmax(processLogits(raw, c));
      if (b.outTokens[2 * i] !== want) {
        throw new Error(`${ctx}: case ${i} ${JSON.stringify(c)}: got ${b.outTokens[2 * i]}, reference ${want}`);
      }
      expect(b.outTokens[2 * i + 1]).toBe(greedy);
      // The logprob stays the raw log_softmax of the chosen token.
      expect(b.outLogprobs[2 * i]!).toBeCloseTo(logSoftmax(raw)[want]!, 4);
    });
  });

  test("penalties change the choice of a repetitive continuation", () => {
    // The prompt's own tokens, counted as if the output had repeated the top ones.
    const ids = order.slice(0, 5), counts = [4, 3, 2, 1, 1];
    const b = run([
      { row: {}, controls: null },
      { row: {}, controls: { frequencyPenalty: 2, presencePenalty: 2, penaltyTokenIds: ids, penaltyCounts: counts } },
    ]);
    expect(b.outTokens[0]).toBe(greedy);
    expect(ids).not.toContain(b.outTokens[1]);
  });

  test("min_p 1.0 equals greedy; min_p keeps only tokens above min_p * p_max", () => {
    const seeds = Array.from({ length: 24 }, (_, i) => BigInt(i * 7919 + seed));
    const b = run(seeds.map((s) => ({ row: { temperature: 1, seed: s }, controls: { minP: 1 } })));
    for (let r = 0; r < seeds.length; r++) expect(b.outTokens[r]).toBe(greedy);
    const minP = 0.3, t = 0.8;
    const c = run(seeds.map((s) => ({ row: { temperature: t, seed: s }, controls: { minP } })));
    const zMax = f32(raw[greedy]! / f32(t));
    for (let r = 0; r < seeds.length; r++) {
      const z = f32(raw[c.outTokens[r]!]! / f32(t));
      expect(Math.exp(z - zMax)).toBeGreaterThanOrEqual(minP * (1 - 1e-6));
    }
  });

  test("logit_bias forces a token; allowed_token_ids restricts sampling; banned tokens never come", () => {
    const forced = order[V - 1]!; // the least likely token
    const allowed = [order[10]!, order[20]!, order[30]!];
    const rows = Array.from({ length: 16 }, (_, i) => BigInt(i + 1)).flatMap((s) => [
      { row: { temperature: 1, seed: s }, controls: { logitBias: [[forced, 100]] as [number, number][] } },
      { row: { temperature: 1.5, seed: s }, controls: { allowedTokenIds: allowed } },
      { row: { temperature: 2, seed: s }, controls: { bannedTokenIds: order.slice(0, 8) } },
    ]);
    const b = run(rows);
    for (let r = 0; r < rows.length; r += 3) {
      expect(b.outTokens[r]).toBe(forced);
      expect(allowed).toContain(b.outTokens[r + 1]!);
      expect(order.slice(0, 8)).not.toContain(b.outTokens[r + 2]!);
    }
  });

  test("top logprobs: the k best of log_softmax(raw), sorted, the chosen token's logprob among them", () => {
    const ks = [1, 5, 20, 3];
    const b = run(
      ks.map((k, i) => ({ row: i === 3 ? { temperature: 1, seed: 5n } : {}, controls: { topLogprobs: k } })),
    );
    expect(b.maxTopLogprobs).toBe(20);
    const ref = logSoftmax(raw);
    ks.forEach((k, r) => {
      const ids = Array.from(b.outTopTokenIds!.subarray(r * 20, r * 20 + 20));
      const lps = Array.from(b.outTopLogprobs!.subarray(r * 20, r * 20 + 20));
      expect(ids.slice(0, k)).toEqual(order.slice(0, k));
      expect(ids.slice(k).every((id) => id === -1)).toBe(true);
      for (let j = 0; j < k; j++) {
        expect(lps[j]!).toBeCloseTo(ref[ids[j]!]!, 4);
        if (j > 0) expect(lps[j]!).toBeLessThanOrEqual(lps[j - 1]!);
      }
      expect(lps.slice(0, k).reduce((s, x) => s + Math.exp(x), 0)).toBeLessThanOrEqual(1 + 1e-5);
      const at = ids.indexOf(b.outTokens[r]!);
      if (at >= 0) expect(lps[at]).toBe(b.outLogprobs[r]!); // the same value, bit for bit
    });
    expect(b.outTokens[0]).toBe(greedy);
  });

  test("a scored row returns the given token's logprob and is not sampled", () => {
    const target = order[77]!;
    const b = run([{ row: { temperature: 1, seed: 3n }, controls: { scoreTokenId: target, topLogprobs: 2 } }]);
    expect(b.outTokens[0]).toBe(target);
    expect(b.outLogprobs[0]!).toBeCloseTo(logSoftmax(raw)[target]!, 4);
    expect(Array.from(b.outTopTokenIds!.subarray(0, 2))).toEqual(order.slice(0, 2));
  });

  test("out_ranks: a scored row's rank counts the logits >= its token's (vLLM's rank); 0 for sampled rows", () => {
    const targets = [order[0]!, order[1]!, order[77]!, order[V - 1]!];
    const rows = [
      ...targets.map((t) => ({ row: {}, controls: { scoreTokenId: t, topLogprobs: 3 } as RowControls })),
      { row: { temperature: 1, seed: 4n }, controls: null },
    ];
    const b = buildStep([{ tokens: prompt, cached: 0, blockTable: [2] }], 16, {
      rows: rows.map((r) => ({ token: prompt.length - 1, ...r.row })),
      vocab: V,
    });
    writer.begin();
    for (const r of rows) writer.add(r.controls);
    writer.attach(b);
    b.outRanks = new Int32Array(rows.length).fill(-7);
    model.step(kv, b);
    const logits = rowLogits(b, 0, V);
    targets.forEach((t, r) => {
      const want = logits.reduce((n, v) => n + (v >= logits[t]! ? 1 : 0), 0);
      expect(b.outRanks![r]).toBe(want);
    });
    expect(b.outRanks![0]).toBe(1);
    expect(b.outRanks![4]).toBe(0);
  });

  const BAD: [string, RowControls][] = [
    ["min_p NaN", { minP: NaN }],
    ["min_p 1.5", { minP: 1.5 }],
    ["presence_penalty 3", { presencePenalty: 3 }],
    ["frequency_penalty -Infinity", { frequencyPenalty: -Infinity }],
    ["repetition_penalty 0", { repetitionPenalty: 0 }],
    ["repetition_penalty Infinity", { repetitionPenalty: Infinity }],
    ["a logit_bias value Infinity", { logitBias: [[1, Infinity]] }],
    ["an allowed token id = vocab", { allowedTokenIds: [V] }],
    ["a banned token id -1", { bannedTokenIds: [-1] }],
    ["a penalty count -1", { repetitionPenalty: 1.2, penaltyTokenIds: [1], penaltyCounts: [-1] }],
    ["top_logprobs 21", { topLogprobs: 21 }],
    ["a score token = vocab", { scoreTokenId: V }],
  ];
  for (const [what, bad] of BAD) {
    test(`${what} fails its row only`, () => {
      const good = { row: { temperature: 0.9, seed: 11n }, controls: { topLogprobs: 2, minP: 0.1 } };
      const threeRows = (middle: RowControls | null) =>
        run([good, { row: { temperature: 1, seed: 1n }, controls: middle }, { row: {}, controls: null }]);
      // The reference is the same rows without the bad controls: on CUDA the LM head of up to two
      // rows is a GEMV and of more a GEMM, whose logits may differ in the last bit, so a batch of
      // another size is no reference for an exact comparison.
      const alone = threeRows(null);
      const b = threeRows(bad);
      expect(b.outTokens[1]).toBe(-1);
      expect(Number.isNaN(b.outLogprobs[1]!)).toBe(true);
      expect(b.outTokens[0]).toBe(alone.outTokens[0]!);
      expect(b.outLogprobs[0]).toBe(alone.outLogprobs[0]!);
      expect(b.outTokens[2]).toBe(greedy);
    });
  }

  test("a pure decode step (the shape CUDA graphs replay) with top logprobs and min_p, then one with lists", () => {
    // Three sequences prefilled, then one decode token each: rows in order, one per sequence.
    const seqs = [0, 1, 2].map((i) => ({ tokens: prompt.slice(i, i + 4), blockTable: [3 + i] }));
    model.step(kv, buildStep(seqs.map((q) => ({ ...q, cached: 0 })), 16, {}));
    const decode = (controls: (RowControls | null)[], rows: Omit<SampleRow, "token">[]) => {
      const b = buildStep(seqs.map((q, i) => ({ tokens: [prompt[i + 4]!], cached: 4, blockTable: q.blockTable })), 16, {
        rows: rows.map((r, i) => ({ token: i, ...r })),
        vocab: V,
      });
      writer.begin();
      for (const c of controls) writer.add(c);
      writer.attach(b);
      model.step(kv, b);
      return b;
    };
    const greedyRows = [{}, {}, {}];
    const a = decode([{ topLogprobs: 4 }, null, { minP: 1, topLogprobs: 1 }], [{}, {}, { temperature: 1, seed: 9n }]);
    for (let r = 0; r < 3; r++) {
      const logits = rowLogits(a, r, V);
      const ord = [...logits.keys()].sort((x, y) => logits[y]! - logits[x]! || x - y);
      expect(a.outTokens[r]).toBe(ord[0]!);
      if (r !== 1) expect(a.outTopTokenIds![r * a.maxTopLogprobs!]).toBe(ord[0]!);
      if (r === 0) expect(Array.from(a.outTopTokenIds!.subarray(0, 4))).toEqual(ord.slice(0, 4));
      if (r === 1) expect(a.outTopTokenIds![a.maxTopLogprobs!]).toBe(-1);
    }
    const first = rowLogits(a, 0, V);
    const forced = [...first.keys()].sort((x, y) => first[x]! - first[y]!)[0]!;
    const c = decode([{ logitBias: [[forced, 100]] }, { bannedTokenIds: [a.outTokens[1]!] }, null], greedyRows);
    expect(c.outTokens[0]).toBe(forced);
    expect(c.outTokens[1]).not.toBe(a.outTokens[1]);
    expect(c.outTokens[2]).toBe(a.outTokens[2]!);
  });

  test("every token excluded fails the row; a malformed start array fails the step, naming it", () => {
    const b = run([{ row: {}, controls: { allowedTokenIds: [greedy], bannedTokenIds: [greedy] } }, {
      row: {},
      controls: null,
    }]);
    expect(b.outTokens[0]).toBe(-1);
    expect(b.outTokens[1]).toBe(greedy);
    const bad = buildStep([{ tokens: prompt, cached: 0, blockTable: [2] }], 16, {});
    writer.begin();
    writer.add({ bannedTokenIds: [1] });
    writer.attach(bad);
    bad.bannedStart = Int32Array.from([1, 1]);
    expect(() => model.step(kv, bad)).toThrow(/banned_start\[0\]=1/);
  });
});
