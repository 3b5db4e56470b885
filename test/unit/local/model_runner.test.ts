// Model runner: the flat lp_step arrays it builds from a scheduled step (a recording model stands
// in for the native one; the real step is exercised by test/system/llm*.test.ts).
import { expect, test } from "bun:test";
import type { KvCache, StepBatch } from "../../../ffi/native.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { ModelRunner } from "../../../lib/local/model_runner.ts";
import { Scheduler } from "../../../lib/local/scheduler.ts";
import { makeSeq, range } from "./fixtures.ts";

const BS = 4;

function setup() {
  const seen: StepBatch[] = [];
  const model = {
    step(_kv: KvCache, b: StepBatch) {
      // Snapshot the used prefix of every array, then "sample" 100 + row.
      seen.push({
        ...b,
        tokenIds: b.tokenIds.slice(0, b.numTokens),
        positions: b.positions.slice(0, b.numTokens),
        slotMapping: b.slotMapping.slice(0, b.numTokens),
        queryStart: b.queryStart.slice(0, b.numSeqs + 1),
        contextLens: b.contextLens.slice(0, b.numSeqs),
        blockTables: b.blockTables.slice(0, b.numSeqs * b.maxBlocksPerSeq),
        sampleIndex: b.sampleIndex.slice(0, b.numRows),
        temperature: b.temperature.slice(0, b.numRows),
        topK: b.topK.slice(0, b.numRows),
        topP: b.topP.slice(0, b.numRows),
        seed: b.seed.slice(0, b.numRows),
      });
      for (let r = 0; r < b.numRows; r++) b.outTokens[r] = 100 + r;
    },
  };
  const kv = { blockSize: BS, numBlocks: 32 } as unknown as KvCache;
  const bm = new BlockManager({ numBlocks: 32, blockSize: BS });
  const sched = new Scheduler(
    { maxNumSeqs: 4, maxNumBatchedTokens: 10, maxModelLen: 64, enableChunkedPrefill: true },
    bm,
  );
  const runner = new ModelRunner(model, kv, { maxNumTokens: 10, maxNumSeqs: 4, maxBlocksPerSeq: 16 });
  const step = () => {
    const out = sched.schedule();
    const r = runner.execute(out);
    sched.completeStep(out, r.tokens, r.logprobs, 0);
    return r;
  };
  return { seen, sched, step };
}

test("a mixed step: decode rows, a prefill chunk without a sample row, slots through block tables", () => {
  const { seen, sched, step } = setup();
  const a = makeSeq(range(5, 10), BS, { params: { temperature: 0.5, topK: -1, topP: 0.9, seed: 77 } });
  const b = makeSeq(range(9, 50), BS);
  sched.add(a);
  sched.add(b);
  step(); // a: 5 tokens (samples), b: first 5 of 9 (no sample)
  const s1 = seen[0]!;
  expect(s1.numSeqs).toBe(2);
  expect(s1.numTokens).toBe(10);
  expect([...s1.queryStart]).toEqual([0, 5, 10]);
  expect([...s1.contextLens]).toEqual([5, 5]);
  expect([...s1.positions]).toEqual([0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
  expect([...s1.tokenIds]).toEqual([...range(5, 10), ...range(5, 50)]);
  const slot = (table: number[], p: number) => table[Math.floor(p / BS)]! * BS + (p % BS);
  expect([...s1.slotMapping]).toEqual([
    ...range(5).map((p) => slot(a.blockTable, p)),
    ...range(5).map((p) => slot(b.blockTable, p)),
  ]);
  expect(s1.numRows).toBe(1);
  expect([...s1.sampleIndex]).toEqual([4]);
  expect(s1.temperature[0]).toBeCloseTo(0.5);
  expect(s1.topK[0]).toBe(0); // -1 (off) becomes 0
  expect(s1.topP[0]).toBeCloseTo(0.9);
  expect(s1.seed[0]).toBe(77n);
  expect(a.outputTokenIds).toEqual([100]);

  step(); // a decodes at position 5; b finishes its prefill (4 tokens) and samples
  const s2 = seen[1]!;
  expect([...s2.queryStart]).toEqual([0, 1, 5]);
  expect([...s2.positions]).toEqual([5, 5, 6, 7, 8]);
  expect([...s2.tokenIds]).toEqual([100, 55, 56, 57, 58]);
  expect([...s2.contextLens]).toEqual([6, 9]);
  expect(s2.maxBlocksPerSeq).toBe(3); // stride = the longest context's blocks
  expect([...s2.blockTables]).toEqual([
    a.blockTable[0]!,
    a.blockTable[1]!,
    s2.blockTables[2]!,
    ...b.blockTable.slice(0, 3),
  ]);
  expect([...s2.sampleIndex]).toEqual([0, 4]);
  expect(a.outputTokenIds).toEqual([100, 100]);
  expect(b.outputTokenIds).toEqual([101]);
});

test("limits are checked with the offending numbers", () => {
  const kv = { blockSize: BS, numBlocks: 8 } as unknown as KvCache;
  expect(() => new ModelRunner({ step() {} }, kv, { maxNumTokens: 0, maxNumSeqs: 1, maxBlocksPerSeq: 1 })).toThrow(
    /maxNumTokens must be a positive integer, got 0/,
  );
  const runner = new ModelRunner({ step() {} }, kv, { maxNumTokens: 4, maxNumSeqs: 1, maxBlocksPerSeq: 8 });
  const seq = makeSeq(range(6), BS);
  seq.blockTable = [0, 1];
  expect(() =>
    runner.fill({
      scheduled: [{ seq, start: 0, numNewTokens: 6, sample: true, isDecode: false }],
      numTokens: 6,
      preempted: [],
    })
  ).toThrow(/step has 6 tokens, limit 4/);
});
