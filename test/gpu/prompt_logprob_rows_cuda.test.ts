// CUDA: scored rows with out_ranks, as prompt logprobs use them (lmpool.h): a prefill whose every
// prompt position is a scored row (cuBLAS LM head, one CTA per row), two scored rows (the GEMV head,
// each row's statistics merged over several CTAs) and a one-sequence decode (a graph replay). Each
// row's token, logprob, top alternatives and rank are checked against the step's own out_logits
// (rank: the logits >= the scored token's), and the sampled row beside them keeps rank 0. Skips
// without CUDA.
import { describe, expect, test } from "bun:test";
import { type RowControls, type StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import { createRandomModel, KERNEL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, rowLogits, type SampleRow, type SeqStep } from "../helpers/step_builder.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();

describe("CUDA: scored rows and their ranks", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  const seed = testSeed();
  const V = 32000, K = 4, bs = 16;
  const { model } = createRandomModel(backends.cuda, {
    ...KERNEL_QWEN3,
    seed,
    vocabSize: V,
    maxNumTokens: 512,
    maxNumSeqs: 64,
  });
  const kv = model.createKvCache(16, bs);
  const table = [0, 1, 2, 3];
  const prompt = Array.from({ length: 40 }, (_, i) => (i * 7919 + 13) % V);
  const writer = new StepControlsWriter(64);

  /** One step of `seqs` whose rows are `rows` with `controls`, with out_ranks and out_logits. */
  function run(seqs: SeqStep[], rows: SampleRow[], controls: (RowControls | null)[]): StepBatch {
    const b = buildStep(seqs, bs, { rows, vocab: V });
    writer.begin();
    for (const c of controls) writer.add(c);
    writer.attach(b);
    b.outRanks = new Int32Array(rows.length).fill(-7);
    model.step(kv, b);
    return b;
  }

  /** Row r scored `target`: its token, logprob, top K and rank agree with its logits. */
  function checkScored(b: StepBatch, r: number, target: number): void {
    const l = rowLogits(b, r, V);
    let mx = -Infinity;
    for (const v of l) mx = Math.max(mx, v);
    let s = 0;
    for (const v of l) s += Math.exp(v - mx);
    const lse = mx + Math.log(s);
    expect(b.outTokens[r]).toBe(target);
    expect(b.outLogprobs[r]!).toBeCloseTo(l[target]! - lse, 3);
    expect(b.outRanks![r]).toBe(l.reduce((n, v) => n + (v >= l[target]! ? 1 : 0), 0));
    const order = [...l.keys()].sort((a, c) => l[c]! - l[a]! || a - c);
    const stride = b.maxTopLogprobs!;
    expect(Array.from(b.outTopTokenIds!.subarray(r * stride, r * stride + K))).toEqual(order.slice(0, K));
  }

  test("a prefill whose every prompt position is scored (the cuBLAS head), beside its sampled row", () => {
    const rows: SampleRow[] = prompt.map((_, p) => ({ token: p }));
    const controls = prompt.map((_, p): RowControls | null =>
      p < prompt.length - 1 ? { scoreTokenId: prompt[p + 1]!, topLogprobs: K } : null
    );
    const b = run([{ tokens: prompt, cached: 0, blockTable: table }], rows, controls);
    for (let p = 0; p < prompt.length - 1; p++) checkScored(b, p, prompt[p + 1]!);
    expect(b.outRanks![prompt.length - 1]).toBe(0);
  });

  test("two scored rows (the GEMV head, statistics over several CTAs) and a decode graph of one", () => {
    const two = run(
      [{ tokens: prompt.slice(0, 8), cached: 0, blockTable: table }],
      [{ token: 2 }, { token: 6 }],
      [{ scoreTokenId: prompt[3]!, topLogprobs: K }, { scoreTokenId: V - 1, topLogprobs: K }],
    );
    checkScored(two, 0, prompt[3]!);
    checkScored(two, 1, V - 1);
    // The cache holds the prompt's K/V: a one-token decode at position 40, scored.
    run([{ tokens: prompt, cached: 0, blockTable: table }], [{ token: prompt.length - 1 }], [null]);
    for (const target of [5, 77]) {
      const d = run([{ tokens: [11], cached: prompt.length, blockTable: table }], [{ token: 0 }], [{
        scoreTokenId: target,
        topLogprobs: K,
      }]);
      checkScored(d, 0, target);
    }
  });
});
