// Prompt-logprob rows without a model: which positions a chunk scores, how a chunk is cut to the
// rows left, the scheduler keeping every step within maxNumSeqs rows (one per running sequence,
// plus a prompt-logprob sequence's scored positions), and such a sequence reading no cached prefix.
import { describe, expect, test } from "bun:test";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { fitPromptRows, promptRowSpan, stepRowsOf } from "../../../lib/local/prompt_logprob_rows.ts";
import { Scheduler, type SchedulerOutput } from "../../../lib/local/scheduler.ts";
import { makeSeq, prefill, range } from "./fixtures.ts";

const BS = 4;

describe("rows of a chunk", () => {
  test("positions 0..P-2 are scored once; the last prompt token samples", () => {
    const seq = makeSeq(range(10), BS, { params: { promptLogprobs: 2 } });
    expect(promptRowSpan(seq, 0, 4)).toEqual({ from: 0, to: 4 });
    expect(stepRowsOf(seq, 0, 10)).toBe(9 + 1);
    expect(stepRowsOf(seq, 4, 6)).toBe(5 + 1);
    seq.promptLogprobs.push(...range(6).map(() => ({ logprob: 0, rank: 1, top: [] })));
    // After a preemption the recompute scores only what is missing.
    expect(stepRowsOf(seq, 0, 10)).toBe(3 + 1);
    expect(stepRowsOf(makeSeq(range(10), BS), 0, 10)).toBe(1);
  });

  test("a chunk is cut to the rows left, before its sampled token, by at least one token", () => {
    const seq = makeSeq(range(10), BS, { params: { promptLogprobs: 0 } });
    expect(fitPromptRows(seq, 0, 10, 10)).toBe(10);
    expect(fitPromptRows(seq, 0, 10, 9)).toBe(9); // 9 scored rows, no sample
    expect(fitPromptRows(seq, 0, 10, 1)).toBe(1);
    expect(fitPromptRows(seq, 3, 7, 2)).toBe(2);
    expect(fitPromptRows(makeSeq(range(10), BS), 0, 10, 1)).toBe(10);
  });
});

describe("the scheduler", () => {
  function run(maxNumSeqs: number) {
    const bm = new BlockManager({ numBlocks: 64, blockSize: BS });
    const sched = new Scheduler(
      { maxNumSeqs, maxNumBatchedTokens: 64, maxModelLen: 128, enableChunkedPrefill: true, stepTargetMs: 0 },
      bm,
    );
    return { bm, sched };
  }

  /** One step with made-up results; returns its rows and what ran. */
  function step(sched: Scheduler): { rows: number; out: SchedulerOutput } {
    const out = sched.schedule();
    let rows = 0;
    for (const s of out.scheduled) {
      rows += stepRowsOf(s.seq, s.start, s.numNewTokens);
      const { from, to } = promptRowSpan(s.seq, s.start, s.numNewTokens);
      for (let p = from; p < to; p++) s.seq.promptLogprobs.push({ logprob: -1, rank: 1, top: [] });
    }
    const sampled = out.scheduled.filter((s) => s.sample).length;
    sched.completeStep(out, new Int32Array(sampled).fill(7), new Float32Array(sampled), 0);
    for (const s of out.scheduled) {
      if (s.sample && s.seq.numOutputTokens >= s.seq.params.maxTokens) sched.finish(s.seq, "length", 0);
    }
    return { rows, out };
  }

  test("every step stays within maxNumSeqs rows, and every prompt position is scored once", () => {
    const { sched } = run(4);
    const pl = [
      makeSeq(range(30), BS, { params: { promptLogprobs: 1 } }),
      makeSeq(range(25, 100), BS, {
        params: { promptLogprobs: 3 },
      }),
    ];
    const plain = [makeSeq(range(12, 200), BS), makeSeq(range(9, 300), BS)];
    for (const s of [plain[0]!, pl[0]!, plain[1]!, pl[1]!]) sched.add(s);
    let steps = 0;
    while (sched.hasUnfinished && steps++ < 200) expect(step(sched).rows).toBeLessThanOrEqual(4);
    expect(sched.hasUnfinished).toBe(false);
    expect(pl[0]!.promptLogprobs).toHaveLength(29);
    expect(pl[1]!.promptLogprobs).toHaveLength(24);
    for (const s of [...pl, ...plain]) expect(s.numOutputTokens).toBe(4);
  });

  test("a sequence asking for prompt logprobs reads no cached prefix", () => {
    const { bm, sched } = run(4);
    const first = makeSeq(range(20), BS);
    expect(prefill(bm, first)).toBe(true);
    bm.free(first);
    expect(bm.lookupPrefix(makeSeq(range(20), BS))).toHaveLength(4);
    const pl = makeSeq(range(20), BS, { params: { promptLogprobs: 0 } });
    expect(bm.lookupPrefix(pl)).toEqual([]);
    sched.add(pl);
    const { out } = step(sched);
    expect(out.scheduled[0]!.start).toBe(0);
  });
});
