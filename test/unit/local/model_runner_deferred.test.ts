// Model runner with a model that splits a step (stepLaunch with deferSampling, stepLaunchSampling):
// a step with constrained rows is launched without their masks, the masks are computed after the
// launch (while the device runs the forward pass) and the sampling gets exactly the controls the
// one-shot step gets; a step without constrained rows keeps the one launch; the step's mask time and
// the part hidden (mask time less the device's wait) come back with the result. Recording models
// stand in for the native one (test/native/step_deferred_sampling.test.ts runs the real halves).
import { expect, test } from "bun:test";
import type { KvCache, StepBatch } from "../../../ffi/native.ts";
import type { Sequence } from "../../../lib/core/sequence.ts";
import { ModelRunner, type StepModel } from "../../../lib/local/model_runner.ts";
import type { SchedulerOutput } from "../../../lib/local/scheduler.ts";
import type { SequenceGrammar } from "../../../lib/local/sequence_grammar.ts";
import { makeSeq, range } from "./fixtures.ts";

const BS = 4;
const kv = { blockSize: BS, numBlocks: 16 } as unknown as KvCache;
const limits = { maxNumTokens: 32, maxNumSeqs: 8, maxBlocksPerSeq: 4 };

/** The control lists a step hands over, per row. */
function listsOf(b: StepBatch): { allowed: number[][]; banned: number[][]; deferred: number } {
  const rows = (start?: Int32Array | null, ids?: Int32Array | null) =>
    Array.from({ length: b.numRows }, (_, r) => (start && ids ? [...ids.subarray(start[r]!, start[r + 1]!)] : []));
  return {
    allowed: rows(b.allowedStart, b.allowedTokenIds),
    banned: rows(b.bannedStart, b.bannedTokenIds),
    deferred: b.deferSampling ?? 0,
  };
}

/** Three prefill rows: constrained (allowed list), free, constrained with bad words (banned lists). */
function stepOf(): SchedulerOutput {
  const so = { kind: "regex" as const, text: "a" };
  const seqs = [
    makeSeq(range(3, 10), BS, { params: { structuredOutput: so } }),
    makeSeq(range(3, 20), BS),
    makeSeq(range(3, 30), BS, { params: { structuredOutput: so, badWordsTokenIds: [[8]] } }),
  ];
  const scheduled = seqs.map((seq, i) => {
    seq.blockTable = [i];
    return { seq, start: 0, numNewTokens: 3, sample: true, isDecode: false };
  });
  return { scheduled, numTokens: 9, preempted: [] };
}

/** Masks by sequence: the first constrained row allows 5 and 7, the other bans 1 and 2. */
function grammars(log: string[]) {
  return (seq: Sequence) =>
    seq.params.structuredOutput
      ? ({
        prepareMask: () => {
          log.push("prepare");
          return Promise.resolve();
        },
        mask: () => {
          log.push("mask");
          return seq.promptTokenIds[0] === 10 ? { allowed: Int32Array.of(5, 7) } : { banned: Int32Array.of(1, 2) };
        },
      } as unknown as SequenceGrammar)
      : undefined;
}

function splittingModel(log: string[], waitMs: number) {
  const seen: ReturnType<typeof listsOf>[] = [];
  let pending: StepBatch | null = null;
  const model: StepModel = {
    step: () => {
      throw new Error("a model that splits steps is not stepped whole here");
    },
    stepLaunch(_kv, b) {
      log.push("launch");
      seen.push(listsOf(b));
      pending = b;
    },
    stepLaunchSampling(b) {
      log.push("sampling");
      seen.push(listsOf(b));
    },
    stepCollect() {
      log.push("collect");
      for (let r = 0; r < pending!.numRows; r++) pending!.outTokens[r] = 100 + r;
      return true;
    },
    lastSamplingWaitMs: () => waitMs,
  };
  return { model, seen };
}

test("constrained rows: launched without masks, masks after the launch, the sampling gets the one-shot controls", async () => {
  const oneShotLog: string[] = [];
  let whole: ReturnType<typeof listsOf> | undefined;
  const oneShot = new ModelRunner(
    { step: (_kv, b) => void (whole = listsOf(b)) },
    kv,
    limits,
    grammars(oneShotLog),
  );
  const r0 = oneShot.execute(stepOf());
  expect(whole).toEqual({ allowed: [[5, 7], [], []], banned: [[], [], [8, 1, 2]], deferred: 0 });
  // A model that cannot split: the masks before the launch, on the step's path, none hidden.
  expect(r0.masks).toMatchObject({ rows: 2, hiddenMs: 0 });

  for (const async of [false, true]) {
    const log: string[] = [];
    const { model, seen } = splittingModel(log, 0);
    const runner = new ModelRunner(model, kv, limits, grammars(log));
    const r = async ? await runner.executeAsync(stepOf(), async () => {}) : runner.execute(stepOf());
    // The asynchronous step prepares each mask the fast way first; the synchronous one computes it in place.
    const prepared = async ? ["prepare", "prepare"] : [];
    expect(log).toEqual(["launch", ...prepared, "mask", "mask", "sampling", "collect"]);
    expect(seen[0]).toEqual({ allowed: [[], [], []], banned: [[], [], [8]], deferred: 1 });
    expect({ ...seen[1]!, deferred: 0 }).toEqual(whole!);
    expect([...r.tokens.subarray(0, 3)]).toEqual([100, 101, 102]);
    // The device never waited: all of the mask time was hidden.
    expect(r.masks!.rows).toBe(2);
    expect(r.masks!.hiddenMs).toBe(r.masks!.maskMs);
  }
});

test("a step without constrained rows keeps the one launch; a device wait longer than the masks hides none", () => {
  const log: string[] = [];
  const { model, seen } = splittingModel(log, 50);
  const runner = new ModelRunner(model, kv, limits, grammars(log));
  const free = stepOf();
  free.scheduled = [free.scheduled[1]!];
  free.numTokens = 3;
  let stepped = 0;
  model.step = (_kv, b) => void (stepped++, expect(b.deferSampling).toBe(0));
  expect(runner.execute(free).masks).toBeUndefined();
  expect(stepped).toBe(1);
  expect(log).toEqual([]);
  const r = runner.execute(stepOf());
  expect(seen.length).toBe(2);
  expect(r.masks!.hiddenMs).toBe(0); // the device waited 50 ms, more than the masks took
});
