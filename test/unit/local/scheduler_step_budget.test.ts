// Scheduler with the cost cap (stepTargetMs): a long prompt is split by the learned step budget,
// decodes are counted but never cut, prefills always get the floor, and the option is checked.
// No model: each step's time comes from a made-up machine fed to the scheduler's StepBudget, as
// LocalEngine feeds it measured times.
import { describe, expect, test } from "bun:test";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { Scheduler, type SchedulerConfig, type SchedulerOutput } from "../../../lib/local/scheduler.ts";
import { chunkPairs, type StepShape } from "../../../lib/local/step_budget.ts";
import { makeSeq, range } from "./fixtures.ts";

const BS = 16;
// About the demo model on the CPU backend (7000 tokens in one step: ~12 s).
const cpu = (s: StepShape) => 2 + 0.1 * s.tokens + 0.0005 * s.pairs;

function setup(cfg: Partial<SchedulerConfig> = {}) {
  const bm = new BlockManager({ numBlocks: 1024, blockSize: BS });
  return new Scheduler({
    maxNumSeqs: 64,
    maxNumBatchedTokens: 8192,
    maxModelLen: 8192,
    enableChunkedPrefill: true,
    ...cfg,
  }, bm);
}

function shapeOf(out: SchedulerOutput): StepShape {
  let pairs = 0;
  for (const s of out.scheduled) pairs += chunkPairs(s.start, s.numNewTokens);
  return { tokens: out.numTokens, pairs };
}

/** One step on `machine`: schedules, "computes" (feeding the time to the budget), applies. Returns the step and its time. */
function step(sched: Scheduler, machine: (s: StepShape) => number): { out: SchedulerOutput; ms: number } {
  const out = sched.schedule();
  const shape = shapeOf(out);
  const ms = machine(shape);
  if (out.numTokens > 0 && out.scheduled.some((s) => !s.isDecode)) sched.stepBudget?.observe(shape, ms);
  const rows = out.scheduled.filter((s) => s.sample).length;
  sched.completeStep(out, Int32Array.from({ length: rows }, () => 7), new Float32Array(rows), 0);
  for (const s of out.scheduled) {
    if (s.sample && s.seq.numOutputTokens >= s.seq.params.maxTokens) sched.finish(s.seq, "length", 0);
  }
  return { out, ms };
}

describe("step cost cap", () => {
  test("on by default with chunked prefill; a long prompt is split by the budget and no step runs past the target", () => {
    const sched = setup();
    expect(sched.config.stepTargetMs).toBe(500);
    const seq = makeSeq(range(6000), BS, { id: "long", params: { maxTokens: 1 } });
    sched.add(seq);
    const steps: { out: SchedulerOutput; ms: number }[] = [];
    while (sched.hasUnfinished) steps.push(step(sched, cpu));
    const chunks = steps.map((s) => s.out.numTokens);
    expect(chunks.reduce((a, b) => a + b, 0)).toBe(6000);
    expect(chunks.length).toBeGreaterThan(10); // in one step it would take cpu(6000 tokens) ~ 9 s
    // The fit folds the machine's 2 ms per step into its slopes, so it may land a little over.
    expect(Math.max(...steps.map((s) => s.ms))).toBeLessThanOrEqual(500 * 1.02);
    expect(Math.max(...chunks)).toBeLessThan(1000);
    expect(seq.numOutputTokens).toBe(1);
    // What load estimates read: the tokens an empty step may take now, from the learned cost.
    expect(sched.stepTokenBudget).toBeGreaterThan(500);
    expect(sched.stepTokenBudget).toBeLessThan(2000);
    expect(setup().stepTokenBudget).toBe(64); // nothing measured yet
  });

  test("stepTargetMs 0: the same prompt is one step (only maxNumBatchedTokens limits it)", () => {
    const sched = setup({ stepTargetMs: 0 });
    expect(sched.stepBudget).toBeNull();
    expect(sched.stepTokenBudget).toBe(8192);
    sched.add(makeSeq(range(6000), BS, { params: { maxTokens: 1 } }));
    expect(step(sched, cpu).out.numTokens).toBe(6000);
  });

  test("decodes are never cut by cost; a prompt still gets the floor while they use up the target", () => {
    const sched = setup();
    // A machine on which 20 decodes alone take longer than the target.
    const slow = (s: StepShape) => 60 * s.tokens + 0.0001 * s.pairs;
    const decoders = Array.from(
      { length: 20 },
      (_, i) => makeSeq(range(100, i * 1000), BS, { id: `d${i}`, params: { maxTokens: 400 } }),
    );
    for (const d of decoders) sched.add(d);
    while (sched.numWaiting > 0 || decoders.some((d) => d.numOutputTokens === 0)) step(sched, slow);
    const p = makeSeq(range(500, 90000), BS, { id: "p", params: { maxTokens: 1 } });
    sched.add(p);
    const { out } = step(sched, slow);
    expect(out.scheduled.filter((s) => s.isDecode).length).toBe(20);
    expect(out.scheduled.find((s) => s.seq === p)!.numNewTokens).toBe(sched.stepBudget!.floorTokens);
  });

  test("a step's last few tokens admit no new prompt: queued prompts of one prefix find it cached once it is computed", () => {
    // A fresh worker's budget is small (64 tokens) and grows with what it measures: a step has a few
    // tokens left after the first prompt's chunk, which would admit every prompt behind it with a
    // crumb, before the first has computed the prefix they share (a prefix is looked up once).
    const sched = setup();
    const fast = (s: StepShape) => 0.5 + 0.001 * s.tokens + 1e-7 * s.pairs;
    const shared = range(640);
    const a = makeSeq([...shared, ...range(40, 70000)], BS, { id: "a", params: { maxTokens: 1 } });
    const b = makeSeq([...shared, ...range(40, 80000)], BS, { id: "b", params: { maxTokens: 1 } });
    const c = makeSeq(range(200, 90000), BS, { id: "c", params: { maxTokens: 1 } });
    // A short request first, so the budget has measured a step (as after an engine's warm-up).
    sched.add(makeSeq(range(40, 5000), BS, { id: "w", params: { maxTokens: 2 } }));
    while (sched.hasUnfinished) step(sched, fast);
    for (const q of [a, b, c]) sched.add(q);
    const first = step(sched, fast).out;
    // Only a full block or a whole (short) prompt starts a new prefill beside the first one.
    for (const x of first.scheduled.slice(1)) {
      expect(x.numNewTokens).toBeGreaterThanOrEqual(Math.min(BS, x.seq.numPromptTokens));
    }
    while (sched.hasUnfinished) step(sched, fast);
    expect(b.numCachedTokens).toBeGreaterThanOrEqual(BS); // admitted after a's first chunk was computed
    expect([a.numOutputTokens, b.numOutputTokens, c.numOutputTokens]).toEqual([1, 1, 1]);
  });

  test("a bad stepTargetMs is a RangeError naming it; without chunked prefill it is off and may not be set", () => {
    expect(() => setup({ stepTargetMs: -1 })).toThrow(
      "stepTargetMs must be a non-negative number of ms (0: no cost cap), got -1",
    );
    expect(() => setup({ stepTargetMs: Number.POSITIVE_INFINITY })).toThrow("got Infinity");
    const off = setup({ enableChunkedPrefill: false });
    expect(off.config.stepTargetMs).toBe(0);
    expect(off.stepBudget).toBeNull();
    expect(() => setup({ enableChunkedPrefill: false, stepTargetMs: 500 })).toThrow(
      /stepTargetMs \(500\) caps prefill chunks, so it needs chunked prefill/,
    );
  });
});
