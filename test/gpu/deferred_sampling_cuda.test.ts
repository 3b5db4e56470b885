// CUDA: a step launched with defer_sampling (the forward pass only; a decode graph that ends at the
// logits for a pure decode batch) and sampled by lp_step_launch_sampling gives the one-shot step's
// tokens, logprobs and top logprobs, on the shapes where both run the same kernels: a decode batch of
// 2 (fused GEMV LM head, its row stats carried over to the later sampling) and of 16 (cuBLAS head)
// with mask-sized allowed and banned lists (the one-shot step runs them eagerly), a decode batch of
// 12 padded to the graph of 16 with graph-safe controls (the one-shot step replays the whole-step
// graph), and a prefill batch. The device's wait for the sampling is timed by events: about the
// host's delay when the host is late, near zero when the sampling is launched while the forward pass
// still runs. Then the engine on CUDA: structured outputs valid, the same greedy tokens as with the
// one-shot step, and the mask time and its hidden share logged. Skips without CUDA.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { type KvCache, type RowControls, type StepBatch, StepControlsWriter } from "../../ffi/native.ts";
import { maskTimesOf } from "../../lib/core/mask_time.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { createRandomModel, KERNEL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, type SampleRow, type SeqStep } from "../helpers/step_builder.ts";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
setDefaultTimeout(120_000);

describe("CUDA: deferred sampling equals the one-shot step", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  const seed = testSeed();
  const V = 4096, bs = 16, n = 16;
  const { model } = createRandomModel(backends.cuda, {
    ...KERNEL_QWEN3,
    seed,
    vocabSize: V,
    maxNumTokens: 2048,
    maxNumSeqs: 64,
  });
  const kv: KvCache = model.createKvCache(n * 8, bs);
  const tables = Array.from({ length: n }, (_, s) => Array.from({ length: 8 }, (_, j) => s * 8 + j));
  const prompts = tables.map((_, s) => Array.from({ length: 20 + 7 * s }, (_, i) => (s * 131 + i * 17) % V));
  const writer = new StepControlsWriter(64);
  const prefill = (k: number): SeqStep[] =>
    prompts.slice(0, k).map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! }));
  const decode = (k: number): SeqStep[] =>
    prompts.slice(0, k).map((p, s) => ({ tokens: [(5 * s + 3) % V], cached: p.length, blockTable: tables[s]! }));
  model.step(kv, buildStep(prefill(n), bs)); // the decode steps' context

  const rowOf = (
    r: number,
  ): Omit<SampleRow, "token"> => (r % 3 === 0 ? {} : { temperature: 0.5 + 0.1 * r, seed: BigInt(r) });
  /** Mask-like lists: half the rows allow a fifth of the vocabulary, the others ban a third of it. */
  const lists = (r: number): RowControls =>
    r % 2
      ? { allowedTokenIds: Array.from({ length: V / 5 }, (_, i) => (i * 5 + r) % V), topLogprobs: 3 }
      : { bannedTokenIds: Array.from({ length: V / 3 }, (_, i) => (i * 3 + r) % V), minP: 0.01 };
  const graphSafe = (
    r: number,
  ): RowControls | null => (r % 2 ? { topLogprobs: 5 } : r % 4 === 0 ? { minP: 0.1 } : null);

  function batch(steps: SeqStep[], controls: (r: number) => RowControls | null): { b: StepBatch; attach(): void } {
    let t = -1;
    const b = buildStep(steps, bs, { rows: steps.map((s, r) => ({ token: t += s.tokens.length, ...rowOf(r) })) });
    b.outTokens.fill(-7);
    return {
      b,
      attach() {
        writer.begin();
        for (let r = 0; r < steps.length; r++) writer.add(controls(r));
        writer.attach(b);
      },
    };
  }

  function compare(name: string, steps: () => SeqStep[], controls: (r: number) => RowControls | null): void {
    test(`${name} (seed ${seed})`, () => {
      const whole = batch(steps(), controls);
      whole.attach();
      model.step(kv, whole.b);
      const halves = batch(steps(), controls);
      halves.b.deferSampling = 1;
      model.stepLaunch(kv, halves.b);
      halves.attach();
      model.stepLaunchSampling(halves.b);
      model.stepCollect(true);
      const w = whole.b, h = halves.b, rows = w.numRows, k = w.maxTopLogprobs ?? 0;
      expect([...h.outTokens.subarray(0, rows)]).toEqual([...w.outTokens.subarray(0, rows)]);
      expect([...h.outLogprobs.subarray(0, rows)]).toEqual([...w.outLogprobs.subarray(0, rows)]);
      if (k > 0) {
        expect(h.maxTopLogprobs).toBe(k);
        expect([...h.outTopTokenIds!.subarray(0, rows * k)]).toEqual([...w.outTopTokenIds!.subarray(0, rows * k)]);
        expect([...h.outTopLogprobs!.subarray(0, rows * k)]).toEqual([...w.outTopLogprobs!.subarray(0, rows * k)]);
      }
      for (let r = 0; r < rows; r++) expect(w.outTokens[r]).toBeGreaterThanOrEqual(0);
    });
  }

  compare("decode batch 2 (graph of 2, GEMV head) with mask lists", () => decode(2), lists);
  compare("decode batch 16 (graph of 16, cuBLAS head) with mask lists", () => decode(16), lists);
  compare("decode batch 12 padded to the graph of 16, graph-safe controls", () => decode(12), graphSafe);
  compare("prefill batch of 6 with mask lists", () => prefill(6), lists);

  test("the device's wait for the sampling: about the host's delay when late, near zero when early", () => {
    const late = batch(decode(16), lists);
    late.b.deferSampling = 1;
    model.stepLaunch(kv, late.b);
    const t = performance.now();
    while (performance.now() - t < 20); // 20 ms of host masks
    late.attach();
    model.stepLaunchSampling(late.b);
    model.stepCollect(true);
    const lateWait = model.lastSamplingWaitMs();
    expect(lateWait).toBeGreaterThan(10);
    expect(lateWait).toBeLessThan(40);
    expect(model.lastStepMs()).toBeLessThan(lateWait); // device time leaves the wait out

    // A long forward pass (a 2048-token prefill) outlasts the host's packing of 16 rows' lists.
    const long = batch([{
      tokens: Array.from({ length: 2048 }, (_, i) => (i * 7) % V),
      cached: 0,
      blockTable: Array.from({ length: 128 }, (_, j) => j),
    }], () => lists(1));
    long.b.deferSampling = 1;
    model.stepLaunch(kv, long.b);
    long.attach();
    model.stepLaunchSampling(long.b);
    model.stepCollect(true);
    console.log(
      `deferred sampling: device wait ${lateWait.toFixed(3)} ms after 20 ms of host work; ${
        model.lastSamplingWaitMs().toFixed(3)
      } ms behind a ${model.lastStepMs().toFixed(3)} ms prefill`,
    );
    expect(model.lastSamplingWaitMs()).toBeLessThan(1);
  });
});

describe("CUDA engine: structured outputs with masks computed during the forward pass", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  const SCHEMA = {
    type: "object",
    properties: { color: { enum: ["red", "green", "blue"] }, n: { type: "integer", minimum: 0, maximum: 99 } },
    required: ["color", "n"],
    additionalProperties: false,
  };
  const structuredOutput = { kind: "json_schema" as const, text: JSON.stringify(SCHEMA), disableAnyWhitespace: true };

  test("valid outputs; one request at a time, the one-shot step's greedy tokens; mask time logged", async () => {
    const llm = await LLM.create({
      model: await tinyModelDir(),
      backend: "cuda",
      numBlocks: 16,
      enablePrefixCaching: false,
    });
    try {
      const prompts = Array.from({ length: 8 }, (_, i) => `item ${i}:`);
      // Mixed batches: constrained and free requests together.
      const [constrained] = await Promise.all([
        llm.generate(prompts, { maxTokens: 48, temperature: 1, seed: 3, structuredOutput }),
        llm.generate(prompts, { maxTokens: 24, temperature: 0.7, seed: 4, ignoreEos: true }),
      ]);
      for (const out of constrained) {
        expect(out.finishReason).toBe("stop");
        const v = JSON.parse(out.text) as { color: string; n: number };
        expect(["red", "green", "blue"]).toContain(v.color);
        expect(Number.isInteger(v.n) && v.n >= 0 && v.n <= 99).toBe(true);
      }
      const counters = llm.stats().ranks[0]!;
      const mask = maskTimesOf(counters, "mask_seconds")!, exposed = maskTimesOf(counters, "mask_exposed_seconds")!;
      const steps = mask.bucketCounts.reduce((a, x) => a + x, 0);
      expect(steps).toBeGreaterThan(0);
      console.log(
        `CUDA engine: ${steps} steps with masks, mean ${(1e3 * mask.sum / steps).toFixed(3)} ms, hidden share ${
          (100 * (1 - exposed.sum / mask.sum)).toFixed(1)
        }%`,
      );
      // One request at a time (batch 1: the same kernels both ways), greedy: deferred, then one-shot.
      const one = async () => {
        const outs: number[][] = [];
        for (const p of prompts.slice(0, 4)) {
          const [out] = await llm.generate(p, { maxTokens: 48, temperature: 0, structuredOutput });
          expect(out!.tokenIds.length).toBeGreaterThan(0);
          outs.push(out!.tokenIds);
        }
        return outs;
      };
      const deferred = await one();
      const model = llm.engine.kv.model as unknown as { stepLaunchSampling?: unknown };
      model.stepLaunchSampling = undefined; // the runner then computes masks before a one-shot launch
      let oneShot: number[][];
      try {
        oneShot = await one();
      } finally {
        delete model.stepLaunchSampling;
      }
      expect(deferred).toEqual(oneShot);
    } finally {
      await llm.shutdown();
    }
  });
});
