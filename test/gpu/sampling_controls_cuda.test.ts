// CUDA: sampling controls and top logprobs on the decode paths test/native's suite does not reach
// with its shapes: a decode graph of batch 2 (fused GEMV LM head, its row stats merged) and a
// decode graph of 16 for batch 12 (cuBLAS head) with top logprobs and min_p (graph-safe), the same
// batch with list controls (which runs eagerly), and a bad row among them. Each result is checked
// against the step's own out_logits, and rows without controls against the same step run without
// any. Skips without CUDA.
import { describe, expect, test } from "bun:test";
import {
  type KvCache,
  type NativeModel,
  type RowControls,
  type StepBatch,
  StepControlsWriter,
} from "../../ffi/native.ts";
import { createRandomModel, KERNEL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, rowLogits, type SampleRow, type SeqStep } from "../helpers/step_builder.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();

describe("CUDA: sampling controls on decode graphs and the GEMV head", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  const seed = testSeed();
  const opts = {
    ...KERNEL_QWEN3,
    seed,
    vocabSize: 1000,
    maxNumTokens: 512,
    maxNumSeqs: 64,
  };
  const cuda = createRandomModel(backends.cuda, opts);
  const model: NativeModel = cuda.model;
  const bs = 16, batch = 12, V = opts.vocabSize;
  const kv: KvCache = model.createKvCache(batch * 4, bs);
  const tables = Array.from({ length: batch }, (_, s) => [0, 1, 2, 3].map((j) => s * 4 + j));
  const prompts = tables.map((_, s) => Array.from({ length: 5 + 3 * s }, (_, i) => (s * 131 + i * 17) % V));
  model.step(kv, buildStep(prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! })), bs, {}));
  const writer = new StepControlsWriter(64);

  function decode(n: number, rows: Omit<SampleRow, "token">[], controls: (RowControls | null)[]): StepBatch {
    const steps: SeqStep[] = Array.from({ length: n }, (_, s) => ({
      tokens: [3 + s],
      cached: prompts[s]!.length,
      blockTable: tables[s]!,
    }));
    const b = buildStep(steps, bs, { rows: rows.map((r, i) => ({ token: i, ...r })), vocab: V });
    writer.begin();
    for (const c of controls) writer.add(c);
    writer.attach(b);
    model.step(kv, b);
    return b;
  }

  const orderOf = (l: Float32Array) => [...l.keys()].sort((a, b) => l[b]! - l[a]! || a - b);

  function checkTop(b: StepBatch, r: number, k: number): void {
    const order = orderOf(rowLogits(b, r, V));
    const stride = b.maxTopLogprobs!;
    expect(Array.from(b.outTopTokenIds!.subarray(r * stride, r * stride + k))).toEqual(order.slice(0, k));
    for (let j = k; j < stride; j++) expect(b.outTopTokenIds![r * stride + j]).toBe(-1);
  }

  for (const n of [2, batch]) {
    test(`decode batch ${n}: top logprobs and min_p 1 (graph-safe controls), then lists (eager)`, () => {
      const rows = Array.from({ length: n }, (_, r) => (r % 2 ? { temperature: 1, seed: BigInt(r) } : {}));
      const controls = rows.map((_, r) => (r % 2 ? { minP: 1, topLogprobs: 3 } : r === 0 ? { topLogprobs: 5 } : null));
      const a = decode(n, rows, controls);
      for (let r = 0; r < n; r++) {
        const order = orderOf(rowLogits(a, r, V));
        expect(a.outTokens[r]).toBe(order[0]!); // greedy, or min_p 1 at temperature 1
        if (r % 2) checkTop(a, r, 3);
        if (r === 0) checkTop(a, r, 5);
        if (r === 0) expect(a.outTopLogprobs![0]).toBe(a.outLogprobs[0]!);
      }
      const forced = orderOf(rowLogits(a, 0, V)).at(-1)!;
      const lists = rows.map((_, r): RowControls | null =>
        r === 0
          ? { logitBias: [[forced, 100]] }
          : r === 1
          ? { bannedTokenIds: [a.outTokens[1]!], topLogprobs: 2 }
          : r === 2 && n > 2
          ? { repetitionPenalty: 3, penaltyTokenIds: [a.outTokens[2]!], penaltyCounts: [1] }
          : null
      );
      const c = decode(n, rows.map(() => ({})), lists);
      expect(c.outTokens[0]).toBe(forced);
      expect(c.outTokens[1]).not.toBe(a.outTokens[1]);
      checkTop(c, 1, 2);
      if (n > 2) {
        // Row 2's greedy token, penalised 3x (a positive logit divided, a negative one multiplied).
        const penalised = Float32Array.from(rowLogits(a, 2, V));
        const t = a.outTokens[2]!;
        penalised[t] = penalised[t]! > 0 ? penalised[t]! / 3 : penalised[t]! * 3;
        expect(c.outTokens[2]).toBe(orderOf(penalised)[0]!);
      }
      for (let r = 3; r < n; r++) expect(c.outTokens[r]).toBe(a.outTokens[r]!);
    });
  }

  test("a bad control in a graph batch fails its row only", () => {
    const rows = Array.from({ length: batch }, () => ({}));
    const good = decode(batch, rows, rows.map(() => null));
    const controls = rows.map((_, r) => (r === 4 ? { minP: 2 } : r === 7 ? { topLogprobs: 30 } : { topLogprobs: 1 }));
    const b = decode(batch, rows, controls);
    for (let r = 0; r < batch; r++) {
      if (r === 4 || r === 7) {
        expect(b.outTokens[r]).toBe(-1);
        expect(b.outTopTokenIds![r * b.maxTopLogprobs!]).toBe(-1);
      } else {
        expect(b.outTokens[r]).toBe(good.outTokens[r]!);
      }
    }
  });
});
