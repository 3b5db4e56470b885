// Ladder arrivals: each rung a Poisson process at its rate, starting where the previous rung's last
// arrival was due, seeded and monotone; rungs from phases or equal parts; `--arrival` parsing.
import { describe, expect, test } from "bun:test";
import { arrivalOffsetsMs, describeArrival, ladderRungs, parseArrival } from "../../../bench/driver/arrival.ts";
import { mean } from "../../../bench/stats/descriptive.ts";
import type { WorkloadRequest } from "../../../bench/workloads/types.ts";

const req = (i: number, phase?: string): WorkloadRequest => ({
  id: `r${i}`,
  promptTokenIds: [1],
  maxTokens: 1,
  ...(phase !== undefined ? { phase } : {}),
});

describe("ladder arrival offsets", () => {
  const rates = [5, 20, 80];
  const perRung = 3000;
  const phased = rates.flatMap((_, k) => Array.from({ length: perRung }, (_, i) => req(k * perRung + i, `rung ${k}`)));

  test("mean gap per rung is 1/rate, offsets never go back, the first request is at 0", () => {
    const a = arrivalOffsetsMs(phased, { kind: "ladder", rates, seed: 3 });
    expect(a.length).toBe(phased.length);
    expect(a[0]).toBe(0);
    expect(a.every((t, i) => i === 0 || t >= a[i - 1]!)).toBe(true);
    rates.forEach((rate, k) => {
      // Gaps that end in rung k, the first one included (drawn from the previous rung's last due time).
      const gaps = Array.from({ length: perRung }, (_, i) => k * perRung + i).filter((i) => i > 0).map((i) =>
        a[i]! - a[i - 1]!
      );
      const m = mean(gaps);
      // 3,000 exponential gaps: the mean is within about 2% (one standard error) of 1/rate; allow 6%.
      expect(m).toBeGreaterThan((1000 / rate) * 0.94);
      expect(m).toBeLessThan((1000 / rate) * 1.06);
    });
  });

  test("seeded: the same seed gives the same offsets, another seed others", () => {
    const a = arrivalOffsetsMs(phased, { kind: "ladder", rates, seed: 3 });
    expect(arrivalOffsetsMs(phased, { kind: "ladder", rates, seed: 3 })).toEqual(a);
    expect(arrivalOffsetsMs(phased, { kind: "ladder", rates, seed: 4 })).not.toEqual(a);
  });

  test("a one-rate ladder is the Poisson process at that rate", () => {
    const plain = Array.from({ length: 50 }, (_, i) => req(i));
    expect(arrivalOffsetsMs(plain, { kind: "ladder", rates: [7], seed: 2 })).toEqual(
      arrivalOffsetsMs(plain, { kind: "poisson", rate: 7, seed: 2 }),
    );
  });

  test("rung k starts where rung k-1's last arrival was due: a slow rung stretches what follows", () => {
    const plain = Array.from({ length: 400 }, (_, i) => req(i));
    const fastThenFast = arrivalOffsetsMs(plain, { kind: "ladder", rates: [100, 100], seed: 1 });
    const slowThenFast = arrivalOffsetsMs(plain, { kind: "ladder", rates: [1, 100], seed: 1 });
    // Same stream of unit gaps: the second half's gaps are equal, shifted by the first half's longer span.
    const shift = slowThenFast[200]! - fastThenFast[200]!;
    expect(shift).toBeGreaterThan(0);
    for (let i = 201; i < 400; i++) expect(slowThenFast[i]! - fastThenFast[i]!).toBeCloseTo(shift, 6);
  });

  test("bad rates are refused", () => {
    expect(() => arrivalOffsetsMs([req(0)], { kind: "ladder", rates: [2, -1], seed: 0 })).toThrow(
      /ladder rate 2 must be a finite number of requests\/s > 0, got -1/,
    );
    expect(() => arrivalOffsetsMs([req(0)], { kind: "ladder", rates: [], seed: 0 })).toThrow(/at least one rung/);
  });
});

describe("ladder rungs", () => {
  test("labelled requests: one rung per run of equal phases, their count must match the rates", () => {
    const rs = [req(0, "a"), req(1, "a"), req(2, "b"), req(3, "c"), req(4, "c")];
    expect(ladderRungs(rs, 3)).toEqual([[0, 1], [2], [3, 4]]);
    expect(() => ladderRungs(rs, 2)).toThrow(/a ladder of 2 rates needs 2 phases, one per rung; the requests form 3/);
  });

  test("unlabelled requests: near-equal consecutive parts covering every request once", () => {
    const rs = Array.from({ length: 11 }, (_, i) => req(i));
    const parts = ladderRungs(rs, 4);
    expect(parts.map((p) => p.length)).toEqual([2, 3, 3, 3]);
    expect(parts.flat()).toEqual(rs.map((_, i) => i));
    expect(() => ladderRungs(rs.slice(0, 2), 3)).toThrow(/at least 3 requests, got 2/);
  });
});

describe("--arrival parsing", () => {
  test("burst, trace, one rate (Poisson) and a list of rates (ladder)", () => {
    expect(parseArrival("burst", 1)).toEqual({ kind: "burst" });
    expect(parseArrival("trace", 1)).toEqual({ kind: "trace" });
    expect(parseArrival("4", 1)).toEqual({ kind: "poisson", rate: 4, seed: 1 });
    expect(parseArrival("2, 4,8.5", 1)).toEqual({ kind: "ladder", rates: [2, 4, 8.5], seed: 1 });
  });

  test("every rate of a ladder must be finite and > 0; the error names --arrival, the value and the rate", () => {
    expect(() => parseArrival("2,0,8", 0)).toThrow(/--arrival .* got "2,0,8"; rate 2 \("0"\) is not one/);
    expect(() => parseArrival("2,,8", 0)).toThrow(/--arrival .*"2,,8"; rate 2/);
    expect(() => parseArrival("2,inf", 0)).toThrow(/--arrival .*rate 2 \("inf"\)/);
    expect(() => parseArrival("2,-4", 0)).toThrow(/--arrival .*rate 2/);
    expect(() => parseArrival("2,x", 0)).toThrow(/--arrival .*rate 2 \("x"\)/);
    expect(() => parseArrival("0", 0)).toThrow(/--arrival .* got "0"$/);
  });

  test("arrivals in words", () => {
    expect(describeArrival({ kind: "ladder", rates: [2, 4], seed: 0 })).toBe("ladder 2, 4 req/s");
    expect(describeArrival({ kind: "poisson", rate: 3, seed: 0 })).toBe("poisson 3 req/s");
    expect(describeArrival({ kind: "burst" })).toBe("burst");
  });
});
