// SVG charts: well-formed documents with the expected bars, whiskers, points and escaping.
import { expect, test } from "bun:test";
import { groupedBarChart } from "../../../bench/report/bar_chart.ts";
import { lineChart } from "../../../bench/report/line_chart.ts";
import { niceTicks } from "../../../bench/report/svg.ts";
import { checkWellFormed } from "./xml_check.ts";

test("grouped bars: one rect per present value, whiskers where an interval exists", () => {
  const svg = groupedBarChart({
    title: "Throughput <tok/s> & more",
    yLabel: "tok/s",
    categories: ["1x", "3x", "5x"],
    series: [
      { name: "round-robin", values: [10, 20, 30], errors: [1, null, 2] },
      { name: "lmpool", values: [15, null, 45], errors: [1.5, null, 0] },
    ],
  });
  const els = checkWellFormed(svg);
  expect(els[0]!.name).toBe("svg");
  expect(els.filter((e) => e.name === "rect" && e.attrs.class === "bar").length).toBe(5);
  expect(els.filter((e) => e.name === "g" && e.attrs.class === "errorbar").length).toBe(3);
  expect(svg).toContain("Throughput &lt;tok/s&gt; &amp; more");
  expect(svg).toContain(">n/a<");
  // The tallest bar reaches the top tick at most; heights are proportional to the values.
  const bars = els.filter((e) => e.attrs.class === "bar").map((e) => Number(e.attrs.height));
  // Category-major order: rr 1x, lmpool 1x, rr 3x, rr 5x, lmpool 5x.
  expect(bars.map((h) => h / bars[0]!)).toEqual(
    [1, 1.5, 2, 3, 4.5].map((r) => expect.closeTo(r, 1)) as unknown as number[],
  );
  expect(Math.max(...bars)).toBeLessThanOrEqual(360);
});

test("mismatched series lengths are RangeErrors naming the series", () => {
  expect(() =>
    groupedBarChart({ title: "t", yLabel: "y", categories: ["a", "b"], series: [{ name: "s1", values: [1] }] })
  ).toThrow(/"s1" has 1 values for 2 categories/);
});

test("line chart: one polyline per series and one marker per point on a log x axis", () => {
  const svg = lineChart({
    title: "KV transfer latency vs size",
    xLabel: "blocks",
    yLabel: "ms",
    logX: true,
    series: [
      { name: "0->1", points: [1, 2, 4, 8].map((b) => ({ x: b, y: 0.1 * b })) },
      { name: "1->0", points: [1, 4, 16].map((b) => ({ x: b, y: 0.2 * b })) },
    ],
  });
  const els = checkWellFormed(svg);
  expect(els.filter((e) => e.name === "polyline").length).toBe(2);
  expect(els.filter((e) => e.name === "circle").length).toBe(7);
  // Log axis: 1, 2, 4, 8 are evenly spaced.
  const xs = els.filter((e) => e.name === "circle").slice(0, 4).map((e) => Number(e.attrs.cx));
  expect(xs[1]! - xs[0]!).toBeCloseTo(xs[3]! - xs[2]!, 0);
  expect(svg).toContain("0-&gt;1");
  expect(() =>
    lineChart({ title: "t", xLabel: "x", yLabel: "y", logX: true, series: [{ name: "a", points: [{ x: 0, y: 1 }] }] })
  ).toThrow(/x > 0, got 0/);
});

test("nice ticks cover the range with round steps", () => {
  expect(niceTicks(0, 97)).toEqual([0, 20, 40, 60, 80, 100]);
  expect(niceTicks(0, 1.2)).toEqual([0, 0.25, 0.5, 0.75, 1, 1.25]);
});

test("the checker itself rejects broken markup", () => {
  expect(() => checkWellFormed("<svg><g></svg>")).toThrow(/closes/);
  expect(() => checkWellFormed("<svg><text>a & b</text></svg>")).toThrow(/stray/);
  expect(() => checkWellFormed("<svg><g>")).toThrow(/unclosed/);
});
