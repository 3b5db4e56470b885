// lp_model_last_step_ms: 0 before any step, then the execution time of the last step that ran
// tokens (device events on CUDA, compute time on the CPU), never above the caller's wall time.
import { expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { createRandomModel, SMALL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep } from "../helpers/step_builder.ts";

test(`the last step's execution time (${native().backend} backend)`, () => {
  const { model } = createRandomModel(native(), {
    ...SMALL_QWEN3,
    seed: testSeed(),
    vocabSize: 512,
    maxNumTokens: 256,
    maxNumSeqs: 4,
  });
  const kv = model.createKvCache(16, 16);
  try {
    expect(model.lastStepMs()).toBe(0);
    const prompt = Array.from({ length: 200 }, (_, i) => (i * 37) % 512);
    const t0 = performance.now();
    model.step(kv, buildStep([{ tokens: prompt, cached: 0, blockTable: Array.from({ length: 13 }, (_, i) => i) }], 16));
    const wall = performance.now() - t0;
    const first = model.lastStepMs();
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(wall);
    // A step with no tokens runs nothing and leaves the reading alone.
    model.step(kv, buildStep([], 16));
    expect(model.lastStepMs()).toBe(first);
  } finally {
    kv.dispose();
    model.dispose();
  }
});
