// lp_step_launch with defer_sampling + lp_step_launch_sampling (lmpool.h): the forward pass at the
// first call, the sampling with controls filled in afterwards, and the same tokens, logprobs, top
// logprobs and refused rows as the one-shot step on the same batch (seeded sampled rows, allowed and
// banned lists as a structured output's mask makes them, penalties, a bad row); a pure decode batch
// too (on CUDA a decode graph ending at the logits, against the one-shot step's eager run of the same
// kernels: 8 sequences, a graph size, so neither pads). Calls out of order are state errors, a batch whose counts changed
// between the calls is refused, and the device's wait for the sampling is reported. Runs on the CPU
// in CI and on CUDA on the GPU machine (LMPOOL_BACKEND=cuda).
import { describe, expect, test } from "bun:test";
import { native, type RowControls, type StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import { createRandomModel, SMALL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, type SampleRow, type SeqStep } from "../helpers/step_builder.ts";

describe(`deferred sampling (${native().backend} backend)`, () => {
  const seed = testSeed();
  const { config, model } = createRandomModel(native(), {
    ...SMALL_QWEN3,
    seed,
    vocabSize: 512,
    maxNumTokens: 256,
    maxNumSeqs: 16,
  });
  const V = config.vocabSize, bs = 16;
  const kv = model.createKvCache(64, bs);
  const writer = new StepControlsWriter(16);
  const prompts = Array.from(
    { length: 8 },
    (_, s) => Array.from({ length: 9 + 4 * s }, (_, i) => (s * 97 + i * 31) % V),
  );
  const tables = prompts.map((_, s) => [3 * s, 3 * s + 1, 3 * s + 2]);
  const prefill = (): SeqStep[] => prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! }));
  const decode = (): SeqStep[] =>
    prompts.map((p, s) => ({ tokens: [(7 * s + 1) % V], cached: p.length, blockTable: tables[s]! }));
  const rows: Omit<SampleRow, "token">[] = [
    { temperature: 0.8, seed: 11n },
    {},
    { temperature: 1.3, topK: 40, seed: 12n },
    { temperature: 0.7, topP: 0.9, seed: 13n },
    { temperature: 1, seed: 14n },
    {},
    { temperature: 0.9, seed: 15n },
    { temperature: 2, topK: 5, seed: 16n },
  ];
  // A mask's allowed list, a mask's banned list with top logprobs, penalties, min_p, a bad row.
  const controls: (RowControls | null)[] = [
    { allowedTokenIds: Array.from({ length: 40 }, (_, i) => (i * 13) % V) },
    { bannedTokenIds: Array.from({ length: 300 }, (_, i) => i), topLogprobs: 4 },
    null,
    { repetitionPenalty: 1.5, penaltyTokenIds: [1, 2, 3], penaltyCounts: [0, 2, 1], minP: 0.05 },
    { minP: 3 },
    { allowedTokenIds: [5, 9], logitBias: [[9, 2]] },
    { bannedTokenIds: [0, 1, 2], allowedTokenIds: Array.from({ length: 100 }, (_, i) => 2 * i) },
    null,
  ];

  function batch(steps: SeqStep[]): StepBatch {
    let t = -1;
    const b = buildStep(steps, bs, { rows: steps.map((s, i) => ({ token: t += s.tokens.length, ...rows[i]! })) });
    b.outTokens.fill(-7);
    return b;
  }
  function attach(b: StepBatch): StepBatch {
    writer.begin();
    for (const c of controls) writer.add(c);
    writer.attach(b);
    return b;
  }
  /** The same step on other blocks would differ: run both forms on the same cache, the one-shot first. */
  function both(steps: () => SeqStep[]): { whole: StepBatch; halves: StepBatch } {
    const whole = attach(batch(steps()));
    model.step(kv, whole);
    const halves = batch(steps());
    halves.deferSampling = 1;
    model.stepLaunch(kv, halves); // no controls, no sampling yet
    attach(halves);
    model.stepLaunchSampling(halves);
    while (!model.stepCollect(false));
    halves.deferSampling = 0;
    return { whole, halves };
  }
  function expectSame(whole: StepBatch, halves: StepBatch): void {
    const n = whole.numRows, k = whole.maxTopLogprobs!;
    expect(k).toBe(4);
    expect([...halves.outTokens.subarray(0, n)]).toEqual([...whole.outTokens.subarray(0, n)]);
    expect([...halves.outLogprobs.subarray(0, n)]).toEqual([...whole.outLogprobs.subarray(0, n)]);
    expect([...halves.outTopTokenIds!.subarray(0, n * k)]).toEqual([...whole.outTopTokenIds!.subarray(0, n * k)]);
    expect([...halves.outTopLogprobs!.subarray(0, n * k)]).toEqual([...whole.outTopLogprobs!.subarray(0, n * k)]);
    expect(whole.outTokens[4]).toBe(-1); // min_p 3: refused in both forms
    expect([5, 9]).toContain(whole.outTokens[5]!);
    expect(whole.outTokens[1]!).toBeGreaterThanOrEqual(300);
  }

  test(`prefill rows: the same outputs as the one-shot step (seed ${seed})`, () => {
    const { whole, halves } = both(prefill);
    expectSame(whole, halves);
    expect(model.lastSamplingWaitMs()).toBeGreaterThanOrEqual(0);
  });

  test(`pure decode rows (a decode graph on CUDA): the same outputs (seed ${seed})`, () => {
    const { whole, halves } = both(decode);
    expectSame(whole, halves);
  });

  test("calls out of order are state errors; changed counts are refused and a valid call still follows", () => {
    expect(() => model.stepLaunchSampling(attach(batch(prefill())))).toThrow(
      /without a step launched with defer_sampling/,
    );
    const b = batch(decode());
    b.deferSampling = 1;
    expect(() => model.step(kv, b)).toThrow(/defer_sampling/);
    model.stepLaunch(kv, b);
    expect(() => model.stepCollect(true)).toThrow(/before lp_step_launch_sampling/);
    expect(() => model.stepLaunch(kv, b)).toThrow(/not collected/);
    attach(b);
    b.numRows = 5;
    expect(() => model.stepLaunchSampling(b)).toThrow(/differ from the launch/);
    b.numRows = 8;
    model.stepLaunchSampling(b);
    expect(() => model.stepLaunchSampling(b)).toThrow(/without a step launched with defer_sampling/);
    expect(model.stepCollect(true)).toBe(true);
    expect(b.outTokens[0]).toBeGreaterThanOrEqual(0);
    // An empty deferred step: launched, its (empty) sampling launched, collected.
    const empty = buildStep([], bs);
    empty.deferSampling = 1;
    model.stepLaunch(kv, empty);
    model.stepLaunchSampling(empty);
    expect(model.stepCollect(true)).toBe(true);
  });

  test("the wait between the forward pass and the sampling's launch is reported; device time leaves it out", () => {
    const b = batch(decode());
    b.deferSampling = 1;
    model.stepLaunch(kv, b);
    const t = performance.now();
    while (performance.now() - t < 30); // the host's masks, 30 ms of them
    attach(b);
    model.stepLaunchSampling(b);
    model.stepCollect(true);
    expect(model.lastSamplingWaitMs()).toBeGreaterThan(20);
    expect(model.lastStepMs()).toBeLessThan(model.lastSamplingWaitMs());
  });
});
