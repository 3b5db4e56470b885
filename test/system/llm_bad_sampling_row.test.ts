// A bad sampling value that reaches the native step (resolveSamplingParams bypassed, as a bug
// upstream would) fails its own sequence with finishReason "error" and an error naming the value;
// the sequences batched with it produce exactly what they produce without it, and the engine keeps
// serving. Real CPU backend, in-process LLM and its LocalEngine.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { StreamDelta } from "../../lib/core/outputs.ts";
import { resolveSamplingParams } from "../../lib/core/sampling_params.ts";
import { Sequence } from "../../lib/core/sequence.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

let llm: LLM;
const next = rng(32);
const prompts = [randomTokens(next, 11), randomTokens(next, 23), randomTokens(next, 6)];
const sampled = { maxTokens: 6, temperature: 0.8, topP: 0.9, seed: 4242, ignoreEos: true };

beforeAll(async () => {
  llm = await LLM.create({ model: engineTestModelDir(), backend: "cpu", numBlocks: 64, maxModelLen: 128 });
});
afterAll(async () => {
  await llm.shutdown();
});

function expectDrained(): void {
  const r = llm.stats().ranks[0]!;
  expect(r.numRunning + r.numWaiting).toBe(0);
  expect(r.numFreeBlocks + r.numReclaimableBlocks).toBe(r.numBlocks);
  llm.engine.blocks.checkInvariants({ drained: true });
}

/** Runs the engine of `llm` directly until the given sequences end; returns every delta. */
function runEngine(seqs: Sequence[]): StreamDelta[] {
  for (const s of seqs) llm.engine.add(s, { stream: true });
  const deltas: StreamDelta[] = [];
  for (let i = 0; llm.engine.hasWork && i < 100; i++) deltas.push(...llm.engine.step().deltas);
  expect(llm.engine.hasWork).toBe(false);
  return deltas;
}

function seqOf(
  id: string,
  prompt: number[],
  salt: string,
  override: Partial<{ temperature: number; topP: number }> = {},
): Sequence {
  // Sequence takes its params as given: this is how a value resolveSamplingParams would refuse
  // still reaches the step.
  const params = { ...resolveSamplingParams(sampled), ...override };
  return new Sequence({
    requestId: id,
    promptTokenIds: prompt,
    params,
    blockSize: llm.config.blockSize,
    cacheSalt: salt,
  });
}

const tokensOf = (deltas: StreamDelta[], id: string) =>
  deltas.filter((d) => d.requestId === id).flatMap((d) => d.tokenIds);

describe("a bad sampling value fails one sequence, not the batch", () => {
  for (
    const [what, override, message] of [
      [
        "temperature Infinity",
        { temperature: Infinity },
        /request bad: not sampled: temperature Infinity \(as float32\) must be finite and >= 0/,
      ],
      ["temperature 1e308 (Infinity as float32)", { temperature: 1e308 }, /temperature Infinity \(as float32\)/],
      ["temperature NaN", { temperature: NaN }, /temperature NaN/],
      ["top_p 0", { topP: 0 }, /top_p 0 \(as float32\) must be in \(0, 1\]/],
    ] as const
  ) {
    test(`${what} in the first step: that request ends with "error", the others as without it`, () => {
      const alone = runEngine([seqOf("a0", prompts[0]!, `alone ${what}`), seqOf("a2", prompts[2]!, `alone ${what}`)]);
      const mixed = runEngine([
        seqOf("m0", prompts[0]!, `mixed ${what}`),
        seqOf("bad", prompts[1]!, `mixed ${what}`, override),
        seqOf("m2", prompts[2]!, `mixed ${what}`),
      ]);
      const bad = mixed.filter((d) => d.requestId === "bad");
      expect(bad).toHaveLength(1);
      expect(bad[0]!).toMatchObject({ finished: true, finishReason: "error", tokenIds: [] });
      expect(bad[0]!.error!.name).toBe("RangeError");
      expect(bad[0]!.error!.message).toMatch(message);
      expect(tokensOf(mixed, "m0")).toEqual(tokensOf(alone, "a0"));
      expect(tokensOf(mixed, "m2")).toEqual(tokensOf(alone, "a2"));
      expect(tokensOf(mixed, "m0")).toHaveLength(6);
      for (const id of ["m0", "m2"]) {
        expect(mixed.find((d) => d.requestId === id && d.finished)!.finishReason).toBe("length");
      }
      expectDrained();
    });
  }

  test("a value gone bad mid-generation ends that request after the tokens it had", () => {
    const seqs = [
      seqOf("d0", prompts[0]!, "decode"),
      seqOf("d1", prompts[1]!, "decode"),
      seqOf("d2", prompts[2]!, "decode"),
    ];
    for (const s of seqs) llm.engine.add(s, { stream: true });
    const deltas: StreamDelta[] = [];
    for (let i = 0; i < 100 && seqs[1]!.numOutputTokens < 2; i++) deltas.push(...llm.engine.step().deltas);
    expect(seqs[1]!.numOutputTokens).toBe(2);
    seqs[1]!.params.temperature = -3;
    for (let i = 0; llm.engine.hasWork && i < 100; i++) deltas.push(...llm.engine.step().deltas);
    const end = deltas.find((d) => d.requestId === "d1" && d.finished)!;
    expect(end.finishReason).toBe("error");
    expect(end.error!.message).toMatch(
      /request d1: not sampled: temperature -3 \(as float32\) must be finite and >= 0/,
    );
    expect(tokensOf(deltas, "d1")).toHaveLength(2);
    for (const id of ["d0", "d2"]) expect(tokensOf(deltas, id)).toHaveLength(6);
    expectDrained();
  });

  test("the LLM keeps serving: a generate() batch with one bad request, then a normal one", async () => {
    const params = { ...sampled };
    const pending = llm.generate(prompts.map((p) => ({ promptTokenIds: p })), params, {
      requestId: "gen",
      cacheSalt: "gen",
    });
    // Submission is synchronous: the sequences wait for the first step.
    llm.engine.scheduler.waiting.find((s) => s.requestId === "gen-1")!.params.temperature = NaN;
    const outs = await pending;
    expect(outs.map((o) => o.finishReason)).toEqual(["length", "error", "length"]);
    const [again0, again2] = await llm.generate(
      [{ promptTokenIds: prompts[0]! }, { promptTokenIds: prompts[2]! }],
      params,
      { cacheSalt: "gen again" },
    );
    expect(outs[0]!.tokenIds).toEqual(again0!.tokenIds);
    expect(outs[2]!.tokenIds).toEqual(again2!.tokenIds);
    expect(llm.healthy).toBe(true);
    expectDrained();
  });
});
