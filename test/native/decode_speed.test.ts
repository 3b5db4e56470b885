// The system tests run on the CPU backend with a tiny model that has the real Qwen3 vocabulary
// (151936) and hidden size 64, so a decode step of 16 sequences must take a few ms. Prints the
// measured times; the bound is loose (shared CI cores) but catches an accidental slow path.
import { describe, expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, SMALL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, type SampleRow } from "../helpers/step_builder.ts";

const BOUND_MS = 100;

describe(`decode speed, vocab 151936 hidden 64 (${native().backend} backend)`, () => {
  const seed = testSeed();
  const rand = rng(seed);
  const { config, model } = createRandomModel(native(), {
    ...SMALL_QWEN3,
    seed,
    vocabSize: 151936,
    maxNumTokens: 512,
    maxNumSeqs: 16,
  });
  const bs = 16, batch = 16, promptLen = 24;
  const kv = model.createKvCache(batch * 4, bs);
  const tables = Array.from({ length: batch }, (_, s) => [0, 1, 2, 3].map((j) => s * 4 + j));
  const prompts = tables.map(() => Array.from({ length: promptLen }, () => Math.floor(rand() * config.vocabSize)));
  model.step(kv, buildStep(prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! })), bs));

  for (
    const [label, row] of [
      ["greedy", {}],
      ["temperature 1", { temperature: 1 }],
      ["temperature 0.8, top_p 0.9", { temperature: 0.8, topP: 0.9 }],
      ["temperature 0.7, top_k 50", { temperature: 0.7, topK: 50 }],
    ] as [string, Partial<SampleRow>][]
  ) {
    test(`batch ${batch} decode, ${label}`, () => {
      const times: number[] = [];
      for (let step = 0; step < 6; step++) {
        const rows = prompts.map((_, s) => ({ token: s, seed: BigInt(s), ...row }));
        const b = buildStep(
          prompts.map((p, s) => ({
            tokens: [(step * 7 + s) % config.vocabSize],
            cached: p.length + step,
            blockTable: tables[s]!,
          })),
          bs,
          { rows },
        );
        const t0 = performance.now();
        model.step(kv, b);
        times.push(performance.now() - t0);
      }
      const best = Math.min(...times);
      console.log(
        `decode batch ${batch} (${label}): best ${best.toFixed(2)} ms, all ${
          times.map((t) => t.toFixed(1)).join(" ")
        } ms`,
      );
      expect(best).toBeLessThan(BOUND_MS);
    });
  }
});
