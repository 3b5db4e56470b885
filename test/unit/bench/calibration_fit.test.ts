// The calibration fit: the NNLS solver finds known solutions and respects x >= 0, and the engine
// fit recovers known coefficients (knee included) from points made with them, over the full sweep
// grid, also with measurement noise.
import { expect, test } from "bun:test";
import { type EngineCoefficients, stepCostOf } from "../../../bench/calibration/engine_profile.ts";
import { evaluateFit, fitEngineModel, type FitInput } from "../../../bench/calibration/engine_fit.ts";
import { leastSquaresQr, nnls } from "../../../bench/calibration/nnls.ts";
import { FULL_SWEEP_GRID, planSweep, SWEEP_KINDS } from "../../../bench/calibration/sweep_grid.ts";
import { seededRandom } from "../../../lib/core/seeded_random.ts";

test("nnls solves a consistent system exactly and clamps a coefficient that wants to be negative", () => {
  const a = [[1, 0], [0, 1], [1, 1]];
  const exact = nnls(a, [2, 3, 5]);
  expect(exact.x[0]).toBeCloseTo(2, 12);
  expect(exact.x[1]).toBeCloseTo(3, 12);
  expect(exact.residualNorm).toBeLessThan(1e-12);
  // Unconstrained: x = (-1, 3); with x >= 0 the first is 0 and the second fits what is left.
  const clamped = nnls([[1, 0], [0, 1], [1, 1]], [-1, 3, 2]);
  expect(clamped.x[0]).toBe(0);
  expect(clamped.x[1]).toBeCloseTo(2.5, 12);
  expect(clamped.x.every((v) => v >= 0)).toBe(true);
});

test("nnls leaves a duplicate column at zero instead of failing; QR reports dependent columns", () => {
  const r = nnls([[1, 1], [2, 2], [3, 3]], [1, 2, 3]);
  expect(r.x[0]! + r.x[1]!).toBeCloseTo(1, 12);
  expect(r.x.filter((v) => v === 0).length).toBe(1);
  expect(leastSquaresQr([[1, 1], [2, 2]], [1, 2])).toBeNull();
  expect(() => nnls([[1, Number.NaN]], [1])).toThrow(RangeError);
});

const TRUTH: EngineCoefficients = {
  fixedMs: 0.45,
  decodeSeqMs: 0.002,
  prefillSeqMs: 0.01,
  tokenMs: 0.0025,
  kneeTokens: 128,
  kvReadMs: 2.5e-5,
  pairMs: 7e-7,
};

function syntheticPoints(c: EngineCoefficients, noise = 0, seed = 1): FitInput[] {
  const rand = seededRandom(seed);
  const plan = planSweep(FULL_SWEEP_GRID, SWEEP_KINDS, { capacityTokens: 1.1e6, blockSize: 256, maxPosition: 40960 });
  return plan.points.map((p, i) => ({
    label: `p${i}`,
    kind: p.kind,
    work: p.work,
    ms: stepCostOf(c, p.work).totalMs * (1 + noise * (2 * rand() - 1)),
  }));
}

test("the fit recovers the coefficients and the knee that made the points", () => {
  const fit = fitEngineModel(syntheticPoints(TRUTH));
  for (const [k, v] of Object.entries(TRUTH)) {
    expect(fit.coefficients[k as keyof EngineCoefficients]).toBeCloseTo(v, 9);
  }
  expect(fit.maxAbsErrorPct).toBeLessThan(1e-6);
});

test("a coefficient that is zero in truth comes back zero, not negative", () => {
  const fit = fitEngineModel(syntheticPoints({ ...TRUTH, decodeSeqMs: 0, prefillSeqMs: 0 }));
  expect(fit.coefficients.decodeSeqMs).toBeCloseTo(0, 9);
  expect(fit.coefficients.prefillSeqMs).toBeCloseTo(0, 9);
  expect(fit.coefficients.kvReadMs).toBeCloseTo(TRUTH.kvReadMs, 12);
});

test("with 3% noise on every point the fit stays within a few percent on the large terms", () => {
  const fit = fitEngineModel(syntheticPoints(TRUTH, 0.03, 7));
  expect(Math.abs(fit.coefficients.kvReadMs / TRUTH.kvReadMs - 1)).toBeLessThan(0.05);
  expect(Math.abs(fit.coefficients.tokenMs / TRUTH.tokenMs - 1)).toBeLessThan(0.05);
  expect(Math.abs(fit.coefficients.pairMs / TRUTH.pairMs - 1)).toBeLessThan(0.05);
  expect(Math.abs(fit.coefficients.fixedMs / TRUTH.fixedMs - 1)).toBeLessThan(0.1);
  expect(fit.meanAbsErrorPct).toBeLessThan(3);
});

test("evaluateFit reports signed errors and the measured range", () => {
  const points: FitInput[] = [
    {
      label: "a",
      kind: "decode",
      work: { decodeSeqs: 4, decodeContext: 4096, prefillSeqs: 0, prefillTokens: 0, prefillPairs: 0 },
      ms: 1,
    },
    {
      label: "b",
      kind: "prefill",
      work: { decodeSeqs: 0, decodeContext: 0, prefillSeqs: 1, prefillTokens: 512, prefillPairs: 131328 },
      ms: 2,
    },
  ];
  const zero = { fixedMs: 1.1, decodeSeqMs: 0, prefillSeqMs: 0, tokenMs: 0, kneeTokens: 0, kvReadMs: 0, pairMs: 0 };
  const e = evaluateFit(zero, points);
  expect(e.points.map((p) => p.predictedMs)).toEqual([1.1, 1.1]);
  expect(e.meanAbsErrorPct).toBeCloseTo((10 + 45) / 2, 9);
  expect(e.maxAbsErrorPct).toBeCloseTo(45, 9);
  expect(e.range).toEqual({
    maxDecodeSeqs: 4,
    maxDecodeContext: 4096,
    maxPrefillTokens: 512,
    maxPrefillPairs: 131328,
    maxStepTokens: 512,
  });
  expect(() => fitEngineModel(points)).toThrow(/at least 3/);
});
