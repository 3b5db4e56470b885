// The worker's step-wait estimate (what a transfer phase message waits for a busy worker's current
// step): constant steps give half a step, mixed steps the length-biased residual E[s^2] / (2 E[s])
// that a message arriving at a uniformly random moment of the step timeline sees, and an idle
// worker reports 0.
import { describe, expect, test } from "bun:test";
import { StepWaitEstimator } from "../../../../lib/transfer/worker/step_wait_estimator.ts";

/** Mean residual of the step a uniformly random moment of the timeline falls in (brute force). */
function simulatedResidual(steps: number[], samples = 100_000): number {
  const total = steps.reduce((a, b) => a + b, 0);
  let sum = 0;
  for (let i = 0; i < samples; i++) {
    let t = ((i + 0.5) / samples) * total;
    for (const s of steps) {
      if (t < s) {
        sum += s - t;
        break;
      }
      t -= s;
    }
  }
  return sum / samples;
}

describe("step wait estimator", () => {
  test("no steps yet, or idle: 0", () => {
    const e = new StepWaitEstimator();
    expect(e.residualMs).toBe(0);
    expect(e.waitMs(true)).toBe(0);
    e.observe(20);
    expect(e.waitMs(false)).toBe(0);
  });

  test("constant steps of s: a random arrival waits s / 2", () => {
    const e = new StepWaitEstimator();
    for (let i = 0; i < 50; i++) e.observe(28);
    expect(e.meanStepMs).toBeCloseTo(28, 10);
    expect(e.residualMs).toBeCloseTo(14, 10);
    expect(e.waitMs(true)).toBeCloseTo(14, 10);
  });

  test("mixed steps: the length-biased residual, more than half the mean step", () => {
    const e = new StepWaitEstimator(0.5);
    e.observe(30);
    e.observe(2); // mean 16, mean square (900 + 4) / 2 = 452
    expect(e.meanStepMs).toBe(16);
    expect(e.residualMs).toBeCloseTo(452 / 32, 10); // 14.125, not 8
    // One 30 ms prefill step per three 2 ms decode steps, steady state with a small alpha.
    const cycle = [30, 2, 2, 2];
    const slow = new StepWaitEstimator(0.01);
    for (let i = 0; i < 2000; i++) for (const s of cycle) slow.observe(s);
    const exact = (900 + 3 * 4) / (2 * 36); // 12.67 ms
    expect(simulatedResidual(cycle)).toBeCloseTo(exact, 2);
    expect(Math.abs(slow.residualMs - exact)).toBeLessThan(0.2);
  });

  test("the EWMA follows a change of load (alpha 0.1: ~30 steps to settle)", () => {
    const e = new StepWaitEstimator();
    for (let i = 0; i < 50; i++) e.observe(2);
    expect(e.residualMs).toBeCloseTo(1, 5);
    for (let i = 0; i < 60; i++) e.observe(30);
    expect(e.residualMs).toBeGreaterThan(14);
    expect(e.residualMs).toBeLessThan(16);
  });

  test("bad arguments are RangeErrors naming the value", () => {
    expect(() => new StepWaitEstimator(0)).toThrow(/alpha must be in \(0, 1\], got 0/);
    expect(() => new StepWaitEstimator().observe(-1)).toThrow(/got -1/);
    expect(() => new StepWaitEstimator().observe(Number.NaN)).toThrow(/got NaN/);
  });
});
