// Prompt logprobs on the CPU backend through the in-process LLM: each prompt position's entry equals
// what an independent request computes for the same prefix (the prompt token forced as the one
// allowed token, whose logprob the step reports from the raw logits), with its rank and top
// alternatives; the rows fit a step of few rows (maxNumSeqs 4, so a prompt of 40 takes chunks of at
// most 4 positions beside other sequences); a cached prefix is not read (every position computed);
// the first streamed delta carries them; the output text keeps special tokens with
// skipSpecialTokens false.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { PromptLogprob, RequestOutput, StreamDelta } from "../../lib/core/outputs.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

let llm: LLM;
let prompt: number[];
const K = 5;

beforeAll(async () => {
  llm = await LLM.create({
    model: engineTestModelDir(),
    backend: "cpu",
    numBlocks: 64,
    maxModelLen: 128,
    maxNumSeqs: 4,
    maxNumBatchedTokens: 64,
  });
  prompt = randomTokens(rng(21), 40);
});
afterAll(() => llm.shutdown());

/** What an independent request reports at position i: prompt[i + 1] forced after prompt[0..i]. */
async function reference(i: number): Promise<{ logprob: number; top: [number, number][] }> {
  const [o] = (await llm.generate({ promptTokenIds: prompt.slice(0, i + 1) }, {
    maxTokens: 1,
    temperature: 0,
    allowedTokenIds: [prompt[i + 1]!],
    logprobs: true,
    topLogprobs: K,
  })) as [RequestOutput];
  expect(o.tokenIds).toEqual([prompt[i + 1]!]);
  return { logprob: o.logprobs![0]!, top: o.topLogprobs![0]! };
}

function checkEntry(e: PromptLogprob, ref: { logprob: number; top: [number, number][] }, token: number): void {
  expect(e.logprob).toBeCloseTo(ref.logprob, 3);
  expect(e.top.map(([id]) => id)).toEqual(ref.top.map(([id]) => id));
  e.top.forEach(([, lp], j) => expect(lp).toBeCloseTo(ref.top[j]![1], 3));
  const at = e.top.findIndex(([id]) => id === token);
  // In the top k its rank is its place there (no ties in these logits); else it ranks below them.
  if (at >= 0) expect(e.rank).toBe(at + 1);
  else expect(e.rank).toBeGreaterThan(K);
}

describe("prompt logprobs", () => {
  test("every position matches an independent request for its prefix, in chunks that fit 4 rows", async () => {
    // Three plain requests share the steps, so the prompt-logprob sequence gets few rows per step.
    const others = [1, 2, 3].map((s) =>
      llm.generate({ promptTokenIds: randomTokens(rng(s), 30) }, { maxTokens: 20, temperature: 0, ignoreEos: true })
    );
    const [o] = (await llm.generate({ promptTokenIds: prompt }, {
      maxTokens: 3,
      temperature: 0,
      promptLogprobs: K,
    })) as [RequestOutput];
    await Promise.all(others);
    const entries = o.promptLogprobs!;
    expect(entries).toHaveLength(prompt.length);
    expect(entries[0]).toBeNull();
    for (const i of [0, 1, 7, 19, 38]) checkEntry(entries[i + 1]!, await reference(i), prompt[i + 1]!);
    for (const e of entries.slice(1)) {
      expect(e!.top).toHaveLength(K);
      expect(e!.rank).toBeGreaterThanOrEqual(1);
    }
  });

  test("a cached prefix is not read: the entries equal those computed from scratch", async () => {
    const params = { maxTokens: 1, temperature: 0, promptLogprobs: 0 };
    const [first] = (await llm.generate({ promptTokenIds: prompt }, params)) as [RequestOutput];
    // The prompt's blocks are cached now; a plain request reads them, a prompt-logprob one does not.
    const [plain] = (await llm.generate({ promptTokenIds: prompt }, { maxTokens: 1, temperature: 0 })) as [
      RequestOutput,
    ];
    expect(plain.metrics.numCachedTokens).toBeGreaterThan(0);
    const [again] = (await llm.generate({ promptTokenIds: prompt }, params)) as [RequestOutput];
    expect(again.metrics.numCachedTokens).toBe(0);
    expect(again.promptLogprobs!.map((e) => e?.logprob)).toEqual(first.promptLogprobs!.map((e) => e?.logprob));
    expect(again.promptLogprobs![1]!.top).toEqual([]);
  });

  test("a stream carries them on its first delta with a token, once", async () => {
    const deltas: StreamDelta[] = [];
    for await (const d of llm.stream({ promptTokenIds: prompt }, { maxTokens: 4, temperature: 0, promptLogprobs: 2 })) {
      deltas.push(d);
    }
    const withTokens = deltas.filter((d) => d.tokenIds.length > 0);
    expect(withTokens[0]!.promptLogprobs).toHaveLength(prompt.length);
    expect(deltas.filter((d) => d.promptLogprobs !== undefined)).toHaveLength(1);
    expect(deltas.at(-1)!.output!.promptLogprobs).toEqual(withTokens[0]!.promptLogprobs!);
  });
});

describe("skipSpecialTokens", () => {
  test("false keeps special tokens in the text, streamed and not", async () => {
    // The full Qwen3 vocabulary (the engine model's stops below the special tokens).
    await using full = await LLM.create({
      model: await tinyModelDir(),
      backend: "cpu",
      numBlocks: 16,
      maxModelLen: 64,
    });
    const special = full.tokenizer.encode("<|im_start|>", { addSpecialTokens: false });
    expect(special).toHaveLength(1);
    // logit_bias forces the special token.
    const params = {
      maxTokens: 3,
      temperature: 0,
      ignoreEos: true,
      logitBias: [[special[0]!, 100]] as [number, number][],
    };
    const input = { promptTokenIds: prompt.slice(0, 8) };
    const [skipped] = (await full.generate(input, params)) as [RequestOutput];
    const [kept] = (await full.generate(input, { ...params, skipSpecialTokens: false })) as [RequestOutput];
    expect(kept.tokenIds).toEqual([special[0]!, special[0]!, special[0]!]);
    expect(skipped.text).toBe("");
    expect(kept.text).toBe("<|im_start|><|im_start|><|im_start|>");
    let streamed = "";
    for await (const d of full.stream(input, { ...params, skipSpecialTokens: false })) streamed += d.text;
    expect(streamed).toBe(kept.text);
  });
});
