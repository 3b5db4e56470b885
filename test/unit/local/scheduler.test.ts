// Scheduler: token and sequence budgets, chunked prefill, decode-first mixing, preemption by
// recompute, rejection of requests that can never fit, FCFS admission, long prefills yielding to
// short work, and abort. No model: a step's
// sampled tokens are made up.
import { describe, expect, test } from "bun:test";
import { CapacityError } from "../../../lib/core/errors.ts";
import type { Sequence } from "../../../lib/core/sequence.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { Scheduler, type SchedulerConfig, type SchedulerOutput, stepKind } from "../../../lib/local/scheduler.ts";
import { makeSeq, range } from "./fixtures.ts";

const BS = 4;

function setup(numBlocks: number, cfg: Partial<SchedulerConfig> = {}) {
  const bm = new BlockManager({ numBlocks, blockSize: BS });
  const sched = new Scheduler({
    maxNumSeqs: 8,
    maxNumBatchedTokens: 64,
    maxModelLen: 256,
    enableChunkedPrefill: true,
    ...cfg,
  }, bm);
  return { bm, sched };
}

/** Runs one step with made-up tokens and finishes sequences that reached max_tokens. */
function step(sched: Scheduler): SchedulerOutput {
  const out = sched.schedule();
  const rows = out.scheduled.filter((s) => s.sample).length;
  sched.completeStep(out, Int32Array.from({ length: rows }, (_, i) => 5000 + i), new Float32Array(rows), 0);
  for (const s of out.scheduled) {
    if (s.sample && s.seq.numOutputTokens >= s.seq.params.maxTokens) sched.finish(s.seq, "length", 0);
  }
  sched.blocks.checkInvariants({ liveBlockTables: sched.running.map((s) => s.blockTable) });
  return out;
}

const shape = (out: SchedulerOutput) => out.scheduled.map((s) => [s.seq.requestId, s.numNewTokens]);

describe("budgets and chunking", () => {
  test("a long prompt is prefilled in chunks of the token budget, sampling only at its end", () => {
    const { sched } = setup(64, { maxNumBatchedTokens: 16 });
    const a = makeSeq(range(40), BS, { id: "a" });
    sched.add(a);
    expect(shape(step(sched))).toEqual([["a", 16]]);
    expect(a.numOutputTokens).toBe(0);
    expect(shape(step(sched))).toEqual([["a", 16]]);
    const last = step(sched);
    expect(shape(last)).toEqual([["a", 8]]);
    expect(last.scheduled[0]!.sample).toBe(true);
    expect(a.numOutputTokens).toBe(1);
    expect(stepKind(step(sched))).toBe("decode");
  });

  test("decodes go first, then prefill chunks fill the remaining budget", () => {
    const { sched } = setup(64, { maxNumBatchedTokens: 10 });
    const a = makeSeq(range(3), BS, { id: "a", params: { maxTokens: 10 } });
    const b = makeSeq(range(3, 100), BS, { id: "b", params: { maxTokens: 10 } });
    sched.add(a);
    sched.add(b);
    expect(shape(step(sched))).toEqual([["a", 3], ["b", 3]]);
    const c = makeSeq(range(20, 200), BS, { id: "c" });
    sched.add(c);
    const out = step(sched);
    expect(shape(out)).toEqual([["a", 1], ["b", 1], ["c", 8]]);
    expect(stepKind(out)).toBe("mixed");
    expect(out.numTokens).toBe(10);
    expect(shape(step(sched))).toEqual([["a", 1], ["b", 1], ["c", 8]]);
    expect(shape(step(sched))).toEqual([["a", 1], ["b", 1], ["c", 4]]);
  });

  test("without chunked prefill a prompt waits until it fits the budget whole", () => {
    const { sched } = setup(64, { maxNumBatchedTokens: 24, maxModelLen: 24, enableChunkedPrefill: false });
    const a = makeSeq(range(10), BS, { id: "a", params: { maxTokens: 5 } });
    const b = makeSeq(range(20, 100), BS, { id: "b", params: { maxTokens: 2 } });
    sched.add(a);
    sched.add(b);
    expect(shape(step(sched))).toEqual([["a", 10]]); // b (20) does not fit the 14 left
    expect(shape(step(sched))).toEqual([["a", 1], ["b", 20]]); // 23 left after a's decode: b fits whole
    expect(() =>
      new Scheduler(
        { maxNumSeqs: 1, maxNumBatchedTokens: 8, maxModelLen: 16, enableChunkedPrefill: false },
        new BlockManager({ numBlocks: 4, blockSize: BS }),
      )
    ).toThrow(/maxNumBatchedTokens \(8\) must be >= maxModelLen \(16\)/);
  });

  test("max_num_seqs caps the running set; FCFS admits in arrival order", () => {
    const { sched } = setup(64, { maxNumSeqs: 2 });
    const seqs = ["a", "b", "c"].map((id, i) => makeSeq(range(3, i * 100), BS, { id, params: { maxTokens: 2 } }));
    for (const s of seqs) sched.add(s);
    expect(shape(step(sched))).toEqual([["a", 3], ["b", 3]]);
    expect(sched.numWaiting).toBe(1);
    expect(shape(step(sched))).toEqual([["a", 1], ["b", 1]]); // both finish (max_tokens 2)
    expect(shape(step(sched))).toEqual([["c", 3]]);
  });

  test("a head request that does not fit blocks later ones (no skipping)", () => {
    const { sched } = setup(6, { maxNumBatchedTokens: 64 });
    const a = makeSeq(range(12), BS, { id: "a", params: { maxTokens: 9 } });
    sched.add(a);
    step(sched); // a holds 3 blocks (12 tokens, then its first output needs a 4th)
    const big = makeSeq(range(16, 100), BS, { id: "big" });
    const small = makeSeq(range(2, 200), BS, { id: "small" });
    sched.add(big);
    sched.add(small);
    expect(shape(step(sched))).toEqual([["a", 1]]);
    expect(sched.waiting.map((s) => s.requestId)).toEqual(["big", "small"]);
  });
});

describe("long prefills yield to short work", () => {
  test("alone, a long prompt takes the whole budget per step", () => {
    const { sched } = setup(64, { maxNumBatchedTokens: 32, longPrefillChunk: 8 });
    sched.add(makeSeq(range(70), BS, { id: "long" }));
    expect(shape(step(sched))).toEqual([["long", 32]]);
    expect(shape(step(sched))).toEqual([["long", 32]]);
  });

  test("while a sequence decodes, long prompts share longPrefillChunk tokens per step and short ones go ahead", () => {
    const { sched } = setup(128, { maxNumBatchedTokens: 32, longPrefillChunk: 8 });
    const d = makeSeq(range(3), BS, { id: "d", params: { maxTokens: 20 } });
    sched.add(d);
    step(sched); // d now decodes
    const l1 = makeSeq(range(40, 100), BS, { id: "l1" });
    const l2 = makeSeq(range(40, 200), BS, { id: "l2" });
    const s1 = makeSeq(range(5, 300), BS, { id: "s1" });
    for (const x of [l1, l2, s1]) sched.add(x);
    // l1 takes the long share; l2 waits for a later step; s1 (5 tokens) is not held back by it.
    expect(shape(step(sched))).toEqual([["d", 1], ["l1", 8], ["s1", 5]]);
    expect(sched.waiting.map((x) => x.requestId)).toEqual(["l2"]);
    expect(shape(step(sched))).toEqual([["d", 1], ["l1", 8], ["s1", 1]]);
    while (sched.hasUnfinished) step(sched); // everything completes; block invariants hold each step
    expect([l1, l2, s1].map((x) => x.numOutputTokens)).toEqual([
      l1.params.maxTokens,
      l2.params.maxTokens,
      s1.params.maxTokens,
    ]);
  });

  test("longPrefillChunk 0 turns the limit off; a bad value is a RangeError naming it", () => {
    const { sched } = setup(128, { maxNumBatchedTokens: 32, longPrefillChunk: 0 });
    const d = makeSeq(range(3), BS, { id: "d", params: { maxTokens: 20 } });
    sched.add(d);
    step(sched);
    sched.add(makeSeq(range(40, 100), BS, { id: "l1" }));
    expect(shape(step(sched))).toEqual([["d", 1], ["l1", 31]]);
    expect(() => setup(8, { longPrefillChunk: -1 })).toThrow("longPrefillChunk must be a non-negative integer, got -1");
    expect(() => setup(8, { longPrefillChunk: 1.5 })).toThrow("got 1.5");
  });
});

describe("prefix caching", () => {
  test("a hit skips the cached tokens", () => {
    const { sched } = setup(64);
    const a = makeSeq(range(13), BS, { id: "a", params: { maxTokens: 1 } });
    sched.add(a);
    step(sched);
    const b = makeSeq(range(14), BS, { id: "b", params: { maxTokens: 1 } });
    sched.add(b);
    expect(shape(step(sched))).toEqual([["b", 2]]);
    expect(b.numCachedTokens).toBe(12);
  });

  test("prompts of one prefix that arrive together prefill it once: the later waits for the blocks under way", () => {
    const { sched } = setup(64);
    // 24 shared tokens (6 blocks), then each its own; the budget (64) would take all three at once.
    const shared = range(24);
    const a = makeSeq([...shared, ...range(5, 100)], BS, { id: "a", params: { maxTokens: 1 } });
    const b = makeSeq([...shared, ...range(6, 200)], BS, { id: "b", params: { maxTokens: 1 } });
    const c = makeSeq(range(10, 300), BS, { id: "c", params: { maxTokens: 1 } });
    for (const x of [a, b, c]) sched.add(x);
    // b shares blocks a is computing: it waits a step; c, unrelated, goes beside a.
    expect(shape(step(sched))).toEqual([["a", 29], ["c", 10]]);
    expect(shape(step(sched))).toEqual([["b", 6]]);
    expect(b.numCachedTokens).toBe(24);
    // A prompt asking for prompt logprobs reads no cache, so it has nothing to wait for.
    const d = makeSeq([...range(30, 400), ...range(4, 500)], BS, { id: "d", params: { maxTokens: 1 } });
    const e = makeSeq([...range(30, 400), ...range(4, 600)], BS, {
      id: "e",
      params: { maxTokens: 1, promptLogprobs: 0 },
    });
    sched.add(d);
    sched.add(e);
    expect(shape(step(sched)).map(([id]) => id)).toEqual(["d", "e"]);
  });
});

describe("preemption", () => {
  test("when blocks run out the youngest running sequence is preempted and recomputed later", () => {
    // 4 blocks of 4: a and b (4-token prompts) each grow into a second block at their 5th token.
    const { bm, sched } = setup(4);
    const a = makeSeq(range(4), BS, { id: "a", params: { maxTokens: 8 } });
    const b = makeSeq(range(4, 100), BS, { id: "b", params: { maxTokens: 8 } });
    sched.add(a);
    sched.add(b);
    expect(shape(step(sched))).toEqual([["a", 4], ["b", 4]]);
    let preempted: Sequence[] = [];
    for (let i = 0; i < 8 && preempted.length === 0; i++) preempted = step(sched).preempted;
    expect(preempted.map((s) => s.requestId)).toEqual(["b"]);
    expect(b.status).toBe("preempted");
    expect(b.numComputedTokens).toBe(0);
    expect(b.blockTable).toEqual([]);
    expect(b.numOutputTokens).toBeGreaterThan(0); // keeps its output; recomputes prompt + output
    expect(sched.waiting[0]).toBe(b);
    expect(sched.numPreemptions).toBe(1);
    while (sched.hasUnfinished) step(sched);
    expect(a.numOutputTokens).toBe(8);
    expect(b.numOutputTokens).toBe(8);
    bm.checkInvariants({ drained: true });
  });

  test("a lone sequence that runs out preempts itself and resumes once blocks return", () => {
    const { bm, sched } = setup(3);
    const a = makeSeq(range(8), BS, { id: "a", params: { maxTokens: 4 } });
    sched.add(a);
    step(sched);
    const blocker = bm.reserve(1)!; // a transfer holds the last free block
    let out = step(sched); // a's 9th token needs a third block
    expect(out.preempted).toEqual([a]);
    expect(out.scheduled).toEqual([]);
    bm.releaseReserved(blocker);
    out = step(sched);
    // Recompute finds its own prompt blocks still cached: only the output token is recomputed.
    expect(shape(out)).toEqual([["a", 1]]);
    expect(a.numCachedTokens).toBe(8);
    while (sched.hasUnfinished) step(sched);
    expect(a.numOutputTokens).toBe(4);
    bm.checkInvariants({ drained: true });
  });
});

describe("rejection and abort", () => {
  test("a request longer than max_model_len is rejected naming the numbers", () => {
    const { sched } = setup(64, { maxModelLen: 32 });
    const s = makeSeq(range(30), BS, { params: { maxTokens: 5 } });
    expect(() => sched.add(s)).toThrow(CapacityError);
    expect(() => sched.add(s)).toThrow(/prompt \(30\) \+ max_tokens \(5\) = 35 tokens exceeds max_model_len \(32\)/);
    expect(sched.numWaiting).toBe(0);
  });

  test("a request needing more blocks than the cache has is rejected", () => {
    const { sched } = setup(4);
    const s = makeSeq(range(16), BS, { params: { maxTokens: 2 } }); // 17 tokens with K/V -> 5 blocks
    expect(() => sched.add(s)).toThrow(/needs 5 KV blocks of 4 tokens, but the cache has 4/);
    sched.add(makeSeq(range(16), BS, { params: { maxTokens: 1 } })); // 16 tokens: exactly 4 blocks
  });

  test("abort frees a running request's blocks at once and drops a waiting one", () => {
    const { bm, sched } = setup(8, { maxNumSeqs: 1 });
    const a = makeSeq(range(9), BS, { id: "a" });
    const b = makeSeq(range(9, 100), BS, { id: "b" });
    sched.add(a);
    sched.add(b);
    step(sched);
    expect(bm.numLiveBlocks).toBe(3);
    expect(sched.abort("a", 1)).toBe(a);
    expect(a.finishReason).toBe("abort");
    expect(bm.numLiveBlocks).toBe(0);
    expect(sched.abort("b", 1)).toBe(b);
    expect(sched.abort("nope", 1)).toBeUndefined();
    expect(sched.hasUnfinished).toBe(false);
    bm.checkInvariants({ drained: true });
  });
});

describe("load", () => {
  test("a waiting sequence counts only the tokens it will prefill: its cached prefix is no work", () => {
    const { sched } = setup(64, { maxNumSeqs: 1 });
    const first = makeSeq(range(21), BS, { id: "first", params: { maxTokens: 1 } });
    sched.add(first);
    step(sched); // prefilled, finished: its 5 complete blocks stay cached
    const running = makeSeq(range(10, 100), BS, { id: "running", params: { maxTokens: 5 } });
    sched.add(running);
    step(sched);
    const hit = makeSeq([...range(21), 7, 7], BS, { id: "hit" }); // 5 cached blocks + 3 tokens
    const miss = makeSeq(range(23, 200), BS, { id: "miss" });
    sched.add(hit);
    sched.add(miss);
    expect(sched.load()).toEqual({ numRunning: 1, numWaiting: 2, runningTokens: 11, waitingTokens: 23 - 20 + 23 });
  });
});
