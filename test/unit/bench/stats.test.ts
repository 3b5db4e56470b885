// Statistics against known values: moments, type-7 percentiles, incomplete beta, Student-t.
import { describe, expect, test } from "bun:test";
import { mean, sampleVariance, stddev } from "../../../bench/stats/descriptive.ts";
import { summarizeDistribution } from "../../../bench/stats/distribution.ts";
import { logGamma, regularizedIncompleteBeta } from "../../../bench/stats/incomplete_beta.ts";
import { studentTInterval } from "../../../bench/stats/interval.ts";
import { percentile } from "../../../bench/stats/percentile.ts";
import { studentTCdf, studentTQuantile } from "../../../bench/stats/student_t.ts";

describe("moments", () => {
  test("mean and sample standard deviation", () => {
    expect(mean([2, 4, 4, 4, 5, 5, 7, 9])).toBe(5);
    expect(sampleVariance([2, 4, 4, 4, 5, 5, 7, 9])).toBeCloseTo(32 / 7, 12);
    expect(stddev([1, 2, 3, 4, 5])).toBeCloseTo(Math.sqrt(2.5), 12);
    expect(mean([])).toBeNaN();
    expect(stddev([3])).toBeNaN();
  });
  test("a non-finite value is a RangeError naming its index", () => {
    expect(() => mean([1, Number.NaN])).toThrow(/values\[1\]/);
  });
});

describe("percentiles (linear interpolation between closest ranks, type 7)", () => {
  test("known arrays", () => {
    const ten = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5];
    expect(percentile(ten, 50)).toBeCloseTo(5.5, 12);
    expect(percentile(ten, 90)).toBeCloseTo(9.1, 12);
    expect(percentile(ten, 99)).toBeCloseTo(9.91, 12);
    expect(percentile(ten, 0)).toBe(1);
    expect(percentile(ten, 100)).toBe(10);
    expect(percentile([15, 20, 35, 40, 50], 40)).toBeCloseTo(29, 12);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
  test("p outside [0, 100] is a RangeError naming it", () => {
    expect(() => percentile([1], 101)).toThrow(/101/);
  });
  test("distribution summary", () => {
    const d = summarizeDistribution([4, 1, 3, 2]);
    expect(d).toMatchObject({ count: 4, mean: 2.5, min: 1, max: 4, p50: 2.5 });
    expect(d.p90).toBeCloseTo(3.7, 12);
    expect(d.p99).toBeCloseTo(3.97, 12);
  });
});

describe("incomplete beta", () => {
  test("log-gamma", () => {
    expect(logGamma(1)).toBeCloseTo(0, 12);
    expect(logGamma(5)).toBeCloseTo(Math.log(24), 12);
    expect(logGamma(0.5)).toBeCloseTo(0.5 * Math.log(Math.PI), 12);
    expect(logGamma(100)).toBeCloseTo(359.13420536957540, 9);
  });
  test("closed forms", () => {
    for (const x of [0.1, 0.37, 0.9]) {
      expect(regularizedIncompleteBeta(x, 1, 1)).toBeCloseTo(x, 13);
      expect(regularizedIncompleteBeta(x, 3, 1)).toBeCloseTo(x ** 3, 13);
      expect(regularizedIncompleteBeta(x, 1, 2)).toBeCloseTo(1 - (1 - x) ** 2, 13);
    }
    expect(regularizedIncompleteBeta(0.5, 7.5, 7.5)).toBeCloseTo(0.5, 13);
    // I_x(1/2, 1/2) = (2/π) asin(√x)
    expect(regularizedIncompleteBeta(0.3, 0.5, 0.5)).toBeCloseTo((2 / Math.PI) * Math.asin(Math.sqrt(0.3)), 12);
  });
});

describe("Student-t", () => {
  test("two-sided 95% quantiles t_{0.975, df}", () => {
    const known: [number, number][] = [
      [1, 12.7062047361747],
      [2, 4.30265272974946],
      [3, 3.18244630528371],
      [4, 2.77644510519779],
      [5, 2.57058183563631],
      [10, 2.22813885198627],
      [30, 2.04227245630124],
      [120, 1.97993040508242],
    ];
    for (const [df, t] of known) expect(studentTQuantile(0.975, df)).toBeCloseTo(t, 9);
  });
  test("other levels and symmetry", () => {
    expect(studentTQuantile(0.995, 1)).toBeCloseTo(63.6567411628715, 8);
    expect(studentTQuantile(0.9, 7)).toBeCloseTo(1.41492392765051, 10);
    expect(studentTQuantile(0.025, 4)).toBeCloseTo(-2.77644510519779, 10);
    expect(studentTQuantile(0.5, 3)).toBe(0);
    expect(studentTQuantile(0.975, 1e6)).toBeCloseTo(1.959966, 5);
  });
  test("the CDF inverts the quantile", () => {
    for (const df of [1, 2.5, 9, 50]) {
      for (const p of [0.01, 0.3, 0.8, 0.999]) expect(studentTCdf(studentTQuantile(p, df), df)).toBeCloseTo(p, 10);
    }
    expect(studentTCdf(0, 5)).toBeCloseTo(0.5, 14);
    // df = 1 is the Cauchy distribution: F(t) = 1/2 + atan(t)/π.
    expect(studentTCdf(2, 1)).toBeCloseTo(0.5 + Math.atan(2) / Math.PI, 13);
  });
  test("bad arguments name the value", () => {
    expect(() => studentTQuantile(1, 3)).toThrow(/got 1/);
    expect(() => studentTQuantile(0.9, 0)).toThrow(/got 0/);
  });
});

describe("confidence interval", () => {
  test("95% interval of a known sample", () => {
    const ci = studentTInterval([1, 2, 3, 4, 5]);
    expect(ci.mean).toBe(3);
    expect(ci.t).toBeCloseTo(2.77644510519779, 10);
    // 2.776445 * sqrt(2.5) / sqrt(5)
    expect(ci.halfWidth as number).toBeCloseTo(1.96324, 4);
    expect(ci.low as number).toBeCloseTo(3 - 1.96324, 4);
    expect(ci.high as number).toBeCloseTo(3 + 1.96324, 4);
  });
  test("two repetitions use t with one degree of freedom", () => {
    const ci = studentTInterval([10, 12]);
    // s = √2, n = 2: half-width = t_{0.975,1} · √2 / √2.
    expect(ci.halfWidth as number).toBeCloseTo(12.7062047361747, 8);
  });
  test("one value has a mean but no interval", () => {
    expect(studentTInterval([7])).toMatchObject({ n: 1, mean: 7, halfWidth: null });
    expect(() => studentTInterval([])).toThrow(/empty/);
  });
});
