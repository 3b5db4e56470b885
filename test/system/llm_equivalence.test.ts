// Greedy (and seeded) outputs do not depend on engine features: prefix caching on/off, chunked
// prefill on/off, batching versus running alone. CPU backend, context-sensitive tiny model.
import { beforeAll, describe, expect, test } from "bun:test";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLM, type LLMOptions } from "../../lib/engine/llm.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

let model: string;
const next = rng(11);
const shared = randomTokens(next, 40);
// Two waves: the second reuses the first's prefixes (32 and 16 tokens: two and one full blocks).
// The first holds one prompt twice: with chunked prefill the copy looks up blocks while the
// original is still writing them.
const wave1 = [0, 1, 2].map((i) => [...shared.slice(0, 20 + i * 9), ...randomTokens(next, 5 + i)]);
wave1.splice(1, 0, wave1[2]!);
const wave2 = [
  ...[0, 1, 2].map((i) => [...shared.slice(0, 33 - i * 8), ...randomTokens(next, 3 + i)]),
  randomTokens(next, 70),
];
const params = { maxTokens: 10, temperature: 0, logprobs: true };
const sampled = { maxTokens: 10, temperature: 0.8, topK: 50, topP: 0.9, seed: 5, logprobs: true };

async function runAll(o: Partial<LLMOptions>): Promise<{ outs: RequestOutput[]; hits: number }> {
  await using llm = await LLM.create({ model, backend: "cpu", numBlocks: 64, maxModelLen: 128, ...o });
  const first = await llm.generate(wave1.map((p) => ({ promptTokenIds: p })), params);
  const second = await llm.generate(wave2.map((p) => ({ promptTokenIds: p })), params);
  const seeded = await llm.generate(wave2.map((p) => ({ promptTokenIds: p })), sampled);
  llm.engine.blocks.checkInvariants({ drained: true });
  return { outs: [...first, ...second, ...seeded], hits: llm.stats().ranks[0]!.prefixHitTokens };
}

function expectSameOutputs(a: RequestOutput[], b: RequestOutput[]): void {
  expect(b.map((o) => o.tokenIds)).toEqual(a.map((o) => o.tokenIds));
  a.forEach((o, i) => o.logprobs!.forEach((lp, j) => expect(b[i]!.logprobs![j]!).toBeCloseTo(lp, 4)));
}

let baseline: { outs: RequestOutput[]; hits: number };

beforeAll(async () => {
  model = engineTestModelDir();
  baseline = await runAll({ enablePrefixCaching: false, enableChunkedPrefill: false });
});

describe("greedy and seeded outputs are independent of engine features", () => {
  test("the baseline is non-trivial: outputs differ across prompts and hit nothing without prefix caching", () => {
    expect(baseline.hits).toBe(0);
    const distinct = new Set(baseline.outs.map((o) => o.tokenIds.join(",")));
    expect(distinct.size).toBeGreaterThan(baseline.outs.length - 2);
    for (const o of baseline.outs) expect(new Set(o.tokenIds).size).toBeGreaterThan(3);
  });

  test("prefix caching on gives the same outputs and does hit the cache", async () => {
    const r = await runAll({ enablePrefixCaching: true, enableChunkedPrefill: false });
    expect(r.hits).toBeGreaterThanOrEqual(16 * 3);
    expectSameOutputs(baseline.outs, r.outs);
  });

  test("chunked prefill (8-token chunks) gives the same outputs", async () => {
    const r = await runAll({ enablePrefixCaching: false, enableChunkedPrefill: true, maxNumBatchedTokens: 8 });
    expectSameOutputs(baseline.outs, r.outs);
  });

  test("chunked prefill with prefix caching gives the same outputs", async () => {
    const r = await runAll({ enablePrefixCaching: true, enableChunkedPrefill: true, maxNumBatchedTokens: 13 });
    expect(r.hits).toBeGreaterThan(0);
    expectSameOutputs(baseline.outs, r.outs);
  });

  test("a request run alone equals the same request in a batch", async () => {
    await using llm = await LLM.create({
      model,
      backend: "cpu",
      numBlocks: 64,
      maxModelLen: 128,
      enablePrefixCaching: false,
    });
    const batch = await llm.generate(wave2.map((p) => ({ promptTokenIds: p })), params);
    for (let i = 0; i < wave2.length; i++) {
      const [alone] = await llm.generate({ promptTokenIds: wave2[i]! }, params);
      expectSameOutputs([batch[i]!], [alone!]);
    }
  });
});
