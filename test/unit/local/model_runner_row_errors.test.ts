// Model runner: a row the native step did not sample (token -1) comes back in rowErrors with the
// value at fault, read from the float32 the step was given; the other rows are untouched. (A
// recording model stands in for the native one; test/native/bad_sampling_rows.test.ts and
// test/system/llm_bad_sampling_row.test.ts run the real step.)
import { expect, test } from "bun:test";
import type { KvCache, StepBatch } from "../../../ffi/native.ts";
import { ModelRunner } from "../../../lib/local/model_runner.ts";
import type { SchedulerOutput } from "../../../lib/local/scheduler.ts";
import { makeSeq, range } from "./fixtures.ts";

const BS = 4;

/** A model that skips the rows lp_step skips (same rule as csrc/common/sampling_row_check.h). */
const skippingModel = {
  step(_kv: KvCache, b: StepBatch) {
    for (let r = 0; r < b.numRows; r++) {
      const ok = b.temperature[r]! >= 0 && Number.isFinite(b.temperature[r]!) && b.topP[r]! > 0 && b.topP[r]! <= 1;
      b.outTokens[r] = ok ? 100 + r : -1;
      b.outLogprobs[r] = ok ? -0.5 : NaN;
    }
  },
};

/** One prefill step of the given sequences, each sampling. */
function stepOf(params: { temperature: number; topP: number }[]): SchedulerOutput {
  let block = 0;
  const scheduled = params.map((p) => {
    const seq = makeSeq(range(3, 10), BS);
    // Bypasses resolveSamplingParams, as a bug upstream of the runner would.
    Object.assign(seq.params, p);
    seq.blockTable = [block++];
    return { seq, start: 0, numNewTokens: 3, sample: true, isDecode: false };
  });
  return { scheduled, numTokens: 3 * params.length, preempted: [] };
}

test("the rows lp_step skipped carry an error naming the bad value; good rows none", () => {
  const kv = { blockSize: BS, numBlocks: 8 } as unknown as KvCache;
  const runner = new ModelRunner(skippingModel, kv, { maxNumTokens: 32, maxNumSeqs: 8, maxBlocksPerSeq: 4 });
  const r = runner.execute(stepOf([
    { temperature: 0.5, topP: 1 },
    { temperature: 1e308, topP: 1 }, // finite as a double, Infinity as the float32 the step reads
    { temperature: 1, topP: 0 },
    { temperature: NaN, topP: 1 },
    { temperature: 0, topP: 1 },
  ]));
  expect([...r.tokens.subarray(0, 5)]).toEqual([100, -1, -1, -1, 104]);
  expect([...r.rowErrors.keys()]).toEqual([1, 2, 3]);
  expect(r.rowErrors.get(1)!).toBeInstanceOf(RangeError);
  expect(r.rowErrors.get(1)!.message).toBe("not sampled: temperature Infinity (as float32) must be finite and >= 0");
  expect(r.rowErrors.get(2)!.message).toBe("not sampled: top_p 0 (as float32) must be in (0, 1]");
  expect(r.rowErrors.get(3)!.message).toMatch(/temperature NaN/);
});

test("a normal step has no row errors", () => {
  const kv = { blockSize: BS, numBlocks: 8 } as unknown as KvCache;
  const runner = new ModelRunner(skippingModel, kv, { maxNumTokens: 32, maxNumSeqs: 8, maxBlocksPerSeq: 4 });
  expect(runner.execute(stepOf([{ temperature: 1, topP: 0.9 }, { temperature: 0, topP: 1 }])).rowErrors.size).toBe(0);
});

test("a -1 the rule does not explain is still an error, naming the row's values", () => {
  const kv = { blockSize: BS, numBlocks: 8 } as unknown as KvCache;
  const broken = { step: (_kv: KvCache, b: StepBatch) => b.outTokens.fill(-1, 0, b.numRows) };
  const runner = new ModelRunner(broken, kv, { maxNumTokens: 32, maxNumSeqs: 8, maxBlocksPerSeq: 4 });
  const r = runner.execute(stepOf([{ temperature: 0.25, topP: 0.5 }]));
  expect(r.rowErrors.get(0)!.message).toMatch(/returned token -1 for temperature 0\.25, top_p 0\.5, top_k 0/);
});
