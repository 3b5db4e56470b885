// lp_step_launch + lp_step_collect: the same tokens and logprobs as lp_step, outputs written only
// once collected; one step in flight per model (a second launch, or a collect without a launch, is
// a state error); an empty step launches and collects too. Runs on the CPU in CI and on CUDA on the
// GPU machine (where the launch returns before the device finished).
import { expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { createRandomModel, SMALL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep } from "../helpers/step_builder.ts";

test(`a step in two halves equals lp_step (${native().backend} backend)`, () => {
  const { model } = createRandomModel(native(), {
    ...SMALL_QWEN3,
    seed: testSeed(),
    vocabSize: 512,
    maxNumTokens: 256,
    maxNumSeqs: 4,
  });
  const kv = model.createKvCache(32, 16);
  try {
    const seqs = (base: number) => [
      {
        tokens: Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % 512),
        cached: 0,
        blockTable: [base, base + 1, base + 2],
      },
      { tokens: Array.from({ length: 17 }, (_, i) => (i * 11 + 3) % 512), cached: 0, blockTable: [base + 3, base + 4] },
    ];
    const whole = buildStep(seqs(0), 16);
    model.step(kv, whole);
    const halves = buildStep(seqs(8), 16); // other blocks, same prompts: the same logits
    halves.outTokens.fill(-1);
    model.stepLaunch(kv, halves);
    expect(() => model.stepLaunch(kv, halves)).toThrow(/not collected/);
    while (!model.stepCollect(false)); // CPU: done at once; CUDA: once the device finished
    expect([...halves.outTokens.subarray(0, 2)]).toEqual([...whole.outTokens.subarray(0, 2)]);
    expect([...halves.outLogprobs.subarray(0, 2)]).toEqual([...whole.outLogprobs.subarray(0, 2)]);
    expect(() => model.stepCollect(true)).toThrow(/without a launched step/);
    // An empty step is launched and collected like any other.
    model.stepLaunch(kv, buildStep([], 16));
    expect(model.stepCollect(true)).toBe(true);
  } finally {
    kv.dispose();
    model.dispose();
  }
});
