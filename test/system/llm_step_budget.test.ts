// No step runs much longer than about a second: on the CPU backend a prompt whose prefill takes
// seconds in one step is, by default, chunked by the budget learned from measured step times, so
// each step stays well under 1.5 s, and the greedy output is the same as the unchunked run's.
// Demo-sized Qwen3 with the engine tests' larger weights and 4096-token vocabulary (outputs depend
// on the whole cached context; see llm_fixtures.ts), generated once under build/.
import { beforeAll, describe, expect, test } from "bun:test";
import { LLM, type LLMOptions } from "../../lib/engine/llm.ts";
import { presetConfig } from "../../lib/model/presets.ts";
import { cachedSyntheticModelDir, ENGINE_TEST_VOCAB, randomTokens, rng } from "./llm_fixtures.ts";

const PROMPT_TOKENS = 4096;
const STEP_LIMIT_MS = 1500;

function demoEngineModelDir(): string {
  return cachedSyntheticModelDir("demo-engine", {
    ...presetConfig("demo"),
    vocab_size: ENGINE_TEST_VOCAB,
    initializer_range: 0.2,
  }, 3);
}

let model: string;
const prompt = randomTokens(rng(5), PROMPT_TOKENS);

async function run(o: Partial<LLMOptions>) {
  await using llm = await LLM.create({ model, backend: "cpu", numBlocks: 300, maxModelLen: PROMPT_TOKENS + 64, ...o });
  const [out] = await llm.generate({ promptTokenIds: prompt }, { maxTokens: 8, temperature: 0 });
  const t = llm.engine.timings;
  return {
    tokenIds: out!.tokenIds,
    prefill: { ...t.byKind.prefill },
    maxStepMs: t.total().maxTotalMs,
    config: llm.config,
  };
}

beforeAll(() => {
  model = demoEngineModelDir();
});

describe("step time cap on the CPU backend", () => {
  test(
    "a prompt that takes seconds in one step runs in steps each under 1.5 s, with the unchunked run's greedy output",
    async () => {
      const whole = await run({ enableChunkedPrefill: false });
      expect(whole.config.stepTargetMs).toBe(0);
      expect(whole.prefill.steps).toBe(1);
      // The test means something only if one step of this prompt is too long.
      expect(whole.prefill.maxTotalMs).toBeGreaterThan(STEP_LIMIT_MS);

      const chunked = await run({});
      expect(chunked.config.enableChunkedPrefill).toBe(true);
      expect(chunked.config.stepTargetMs).toBe(500);
      expect(chunked.config.maxNumBatchedTokens).toBeGreaterThanOrEqual(PROMPT_TOKENS); // not what splits it
      expect(chunked.prefill.steps).toBeGreaterThan(3);
      expect(chunked.maxStepMs).toBeLessThan(STEP_LIMIT_MS);
      expect(chunked.tokenIds).toEqual(whole.tokenIds);
      expect(new Set(chunked.tokenIds).size).toBeGreaterThan(1);
    },
    180_000,
  );

  test("stepTargetMs needs chunked prefill: asking for both off and a target is refused naming it", async () => {
    await expect(run({ enableChunkedPrefill: false, stepTargetMs: 500 })).rejects.toThrow(/stepTargetMs \(500\)/);
  });
});
