// The LLM API on the CPU backend: generate, stream, abort (by id, signal, early break),
// rejection, stats, cache salts, shutdown, and event-loop friendliness.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AbortedError, CapacityError, DisposedError } from "../../lib/core/errors.ts";
import type { StreamDelta } from "../../lib/core/outputs.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { ENGINE_TEST_VOCAB, engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

let llm: LLM;
const next = rng(3);
const prompts = [randomTokens(next, 12), randomTokens(next, 30), randomTokens(next, 5)];
const greedy = { maxTokens: 8, temperature: 0, ignoreEos: true };

beforeAll(async () => {
  llm = await LLM.create({ model: engineTestModelDir(), backend: "cpu", numBlocks: 48, maxModelLen: 160 });
});
afterAll(async () => {
  await llm.shutdown();
});

function expectDrained(): void {
  const r = llm.stats().ranks[0]!;
  expect(r.numRunning + r.numWaiting).toBe(0);
  expect(r.kvUsage).toBe(0);
  expect(r.numFreeBlocks + r.numReclaimableBlocks).toBe(r.numBlocks);
  llm.engine.blocks.checkInvariants({ drained: true });
}

describe("generate", () => {
  test("returns outputs in input order with ids, text and metrics", async () => {
    const t0 = performance.timeOrigin + performance.now();
    const outs = await llm.generate(prompts.map((p) => ({ promptTokenIds: p })), greedy);
    expect(outs.map((o) => o.promptTokenIds)).toEqual(prompts);
    for (const [i, o] of outs.entries()) {
      const [alone] = await llm.generate({ promptTokenIds: prompts[i]! }, greedy);
      expect(o.tokenIds).toEqual(alone!.tokenIds);
      expect(o.tokenIds).toHaveLength(8);
      expect(o.finishReason).toBe("length");
      expect(o.text).toBe(llm.tokenizer.decode(o.tokenIds, { skipSpecialTokens: true }));
      const m = o.metrics;
      expect(m.arrivalTime).toBeGreaterThanOrEqual(t0 - 1);
      expect(m.firstTokenTime!).toBeGreaterThanOrEqual(m.arrivalTime);
      expect(m.finishTime!).toBeGreaterThanOrEqual(m.firstTokenTime!);
      expect(m.rank).toBe(0);
    }
    // Re-running a prompt finds its complete blocks cached.
    expect(outs[1]!.metrics.numCachedTokens).toBe(0);
    const [again] = await llm.generate({ promptTokenIds: prompts[1]! }, greedy);
    expect(again!.metrics.numCachedTokens).toBe(16);
    expectDrained();
  });

  test("text prompts are tokenized; a single input gives a one-element array", async () => {
    const text = "int main() { return 0; }"; // every id below the test model's 4096-token vocabulary
    const outs = await llm.generate({ prompt: text }, { maxTokens: 3, temperature: 0 });
    expect(outs).toHaveLength(1);
    expect(outs[0]!.promptTokenIds).toEqual(llm.tokenizer.encode(text));
    const [viaString] = await llm.generate(text, { maxTokens: 3, temperature: 0 });
    expect(viaString!.tokenIds).toEqual(outs[0]!.tokenIds);
    // A prompt whose ids the model cannot embed is refused, not sent to the kernel.
    await expect(llm.generate("Hello world")).rejects.toThrow(
      /the encoded prompt\[0\] = 9707 is not a token id in 0..4095/,
    );
    expectDrained();
  });

  test("a request that can never fit is rejected with the numbers; the others are unaffected", async () => {
    const err = await llm.generate([{ promptTokenIds: prompts[0]! }, { promptTokenIds: randomTokens(next, 150) }], {
      maxTokens: 20,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(CapacityError);
    expect((err as Error).message).toMatch(
      /prompt \(150\) \+ max_tokens \(20\) = 170 tokens exceeds max_model_len \(160\)/,
    );
    expectDrained();
    const [ok] = await llm.generate({ promptTokenIds: prompts[0]! }, greedy);
    expect(ok!.tokenIds).toHaveLength(8);
  });

  test("bad inputs are TypeError/RangeError naming the value", async () => {
    await expect(llm.generate({ promptTokenIds: [1, ENGINE_TEST_VOCAB] })).rejects.toThrow(
      `promptTokenIds[1] = ${ENGINE_TEST_VOCAB} is not a token id`,
    );
    await expect(llm.generate({ promptTokenIds: [1] }, { maxTokens: 0 })).rejects.toThrow(
      /maxTokens must be an integer >= 1, got 0/,
    );
    await expect(llm.generate({ promptTokenIds: [] })).rejects.toThrow(/empty prompt/);
  });
});

describe("stream and abort", () => {
  test("deltas concatenate to the final output", async () => {
    const deltas: StreamDelta[] = [];
    for await (const d of llm.stream({ promptTokenIds: prompts[1]! }, { ...greedy, logprobs: true })) deltas.push(d);
    const last = deltas.at(-1)!;
    expect(last.finished).toBe(true);
    expect(deltas.slice(0, -1).every((d) => !d.finished)).toBe(true);
    expect(deltas.flatMap((d) => d.tokenIds)).toEqual(last.output!.tokenIds);
    expect(deltas.map((d) => d.text).join("")).toBe(last.output!.text);
    expect(deltas.flatMap((d) => d.logprobs!)).toEqual(last.output!.logprobs!);
    const [g] = await llm.generate({ promptTokenIds: prompts[1]! }, greedy);
    expect(last.output!.tokenIds).toEqual(g!.tokenIds);
  });

  test("abort(id) ends the stream with finishReason abort and frees its blocks at once", async () => {
    const deltas: StreamDelta[] = [];
    for await (
      const d of llm.stream({ promptTokenIds: prompts[1]! }, { maxTokens: 100, temperature: 0 }, {
        requestId: "to-abort",
      })
    ) {
      deltas.push(d);
      if (deltas.length === 3) {
        llm.abort("to-abort");
        expect(llm.stats().ranks[0]!.kvUsage).toBe(0);
      }
    }
    expect(deltas).toHaveLength(4);
    expect(deltas.at(-1)!.finishReason).toBe("abort");
    expect(deltas.at(-1)!.output!.tokenIds).toHaveLength(3);
    expectDrained();
  });

  test("an AbortSignal aborts; an already aborted signal throws AbortedError", async () => {
    const ctl = new AbortController();
    const outs = llm.generate([{ promptTokenIds: prompts[0]! }, { promptTokenIds: prompts[2]! }], {
      maxTokens: 100,
      temperature: 0,
    }, { signal: ctl.signal, requestId: "sig" });
    setTimeout(() => ctl.abort(), 5);
    const done = await outs;
    expect(done.map((o) => o.requestId)).toEqual(["sig-0", "sig-1"]);
    expect(done.map((o) => o.finishReason)).toEqual(["abort", "abort"]);
    expectDrained();
    await expect(llm.generate({ promptTokenIds: [1, 2] }, {}, { signal: ctl.signal })).rejects.toThrow(AbortedError);
  });

  test("breaking out of a stream early aborts the request", async () => {
    let n = 0;
    for await (const _ of llm.stream({ promptTokenIds: prompts[0]! }, { maxTokens: 100, temperature: 0 })) {
      if (++n === 2) break;
    }
    expectDrained();
    expect(llm.stats().ranks[0]!.numFinished).toBeGreaterThan(0);
  });
});

describe("engine behaviour", () => {
  test("cache salts isolate tenants' prefix caches", async () => {
    const p = randomTokens(next, 40);
    await llm.generate({ promptTokenIds: p }, greedy, { cacheSalt: "tenant-a" });
    const [other] = await llm.generate({ promptTokenIds: p }, greedy, { cacheSalt: "tenant-b" });
    const [same] = await llm.generate({ promptTokenIds: p }, greedy, { cacheSalt: "tenant-a" });
    expect(other!.metrics.numCachedTokens).toBe(0);
    expect(same!.metrics.numCachedTokens).toBe(32);
    expect(same!.tokenIds).toEqual(other!.tokenIds);
  });

  test("the step loop yields: timers fire while a long generation runs", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const t0 = performance.now();
    await llm.generate(prompts.map((p) => ({ promptTokenIds: p })), { maxTokens: 60, temperature: 0, ignoreEos: true });
    const ms = performance.now() - t0;
    clearInterval(timer);
    expect(ticks).toBeGreaterThanOrEqual(Math.min(5, Math.floor(ms / 4)));
  });

  test("stats count finished requests and generated tokens", () => {
    const r = llm.stats();
    expect(r.ranks).toHaveLength(1);
    expect(r.ranks[0]!.numFinished).toBeGreaterThan(10);
    expect(r.ranks[0]!.numGeneratedTokens).toBeGreaterThan(100);
    expect(r.ranks[0]!.prefixHitTokens).toBeGreaterThan(0);
    expect(r.ranks[0]!.prefixQueryTokens).toBeGreaterThan(r.ranks[0]!.prefixHitTokens);
    expect(llm.model).toMatchObject({
      vocabSize: ENGINE_TEST_VOCAB,
      blockSize: 16,
      backend: "cpu",
      numRanks: 1,
      maxModelLen: 160,
    });
  });

  test("shutdown aborts running requests, is idempotent, and later use throws DisposedError", async () => {
    const own = await LLM.create({ model: engineTestModelDir(), backend: "cpu", numBlocks: 16, maxModelLen: 64 });
    const pending = own.generate({ promptTokenIds: prompts[0]! }, { maxTokens: 50, temperature: 0 });
    await new Promise((r) => setTimeout(r, 2));
    await own.shutdown();
    expect((await pending)[0]!.finishReason).toBe("abort");
    await own.shutdown();
    expect(own.healthy).toBe(false);
    await expect(own.generate({ promptTokenIds: [1] })).rejects.toThrow(DisposedError);
  });

  test("await using disposes", async () => {
    let ref: LLM | undefined;
    {
      await using scoped = await LLM.create({
        model: engineTestModelDir(),
        backend: "cpu",
        numBlocks: 8,
        maxModelLen: 64,
      });
      ref = scoped;
      expect(scoped.healthy).toBe(true);
    }
    expect(ref!.healthy).toBe(false);
  });
});
