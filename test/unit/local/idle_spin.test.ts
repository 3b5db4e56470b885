// The worker's idle spin setting: GPU default, CPU off, an explicit value, and a bad one named.
import { expect, test } from "bun:test";
import { GPU_IDLE_SPIN_MS, idleSpinMs } from "../../../lib/local/idle_spin.ts";

test("unset: GPU workers spin, CPU workers do not; a value is taken as given", () => {
  expect(idleSpinMs("cuda", undefined)).toBe(GPU_IDLE_SPIN_MS);
  expect(idleSpinMs("cpu", "")).toBe(0);
  expect(idleSpinMs("cuda", "0")).toBe(0);
  expect(idleSpinMs("cpu", "12.5")).toBe(12.5);
});

test("a bad value is a RangeError naming it", () => {
  expect(() => idleSpinMs("cuda", "-1")).toThrow(/LMPOOL_IDLE_SPIN_MS must be a number >= 0, got "-1"/);
  expect(() => idleSpinMs("cuda", "soon")).toThrow(RangeError);
});
