/**
 * The serving benchmark's line on structured-output masks: what the server's per-step histograms
 * (lmpool_structured_output_mask_seconds and _mask_exposed_seconds, lib/core/mask_time.ts) gained
 * over the run, summed over its engines: steps with constrained rows, the mean and p99 mask time,
 * and the share of it the forward pass hid (1 - exposed / mask, over the run's sums). The mean is
 * exact (sum / count); the p99 is read from the buckets (1, 1.5, 2, 3, 5, 7 per decade), so it is
 * good to the bucket that holds it, at worst 1.67x wide.
 * @module
 */
import { histogramQuantile } from "../stats/histogram_quantile.ts";

const FAMILIES = {
  mask: "lmpool_structured_output_mask_seconds",
  exposed: "lmpool_structured_output_mask_exposed_seconds",
} as const;

/** One histogram summed over engines: cumulative counts by bound, the sum (s) and the count. */
export interface SummedHistogram {
  bounds: number[];
  cumulative: number[];
  sum: number;
  count: number;
}

/** Both mask histograms of one /metrics scrape. */
export type MaskHistograms = Record<keyof typeof FAMILIES, SummedHistogram>;

/** What the run's steps with constrained rows spent on masks (ms). */
export interface MaskTimeSummary {
  steps: number;
  meanMs: number;
  p99Ms: number;
  exposedMeanMs: number;
  exposedP99Ms: number;
  /** Share of the mask time the forward pass hid, 0..1 (NaN without steps). */
  hiddenShare: number;
}

/** `family`'s series in exposition text, summed over their labels (engines); null when it has none. */
function summed(lines: readonly string[], family: string): SummedHistogram | null {
  const byBound = new Map<number, number>();
  let sum = 0, count = 0;
  for (const line of lines) {
    if (!line.startsWith(family)) continue;
    const sample = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) continue;
    const [, name, labels, text] = sample;
    const value = Number(text);
    if (name === `${family}_sum`) sum += value;
    else if (name === `${family}_count`) count += value;
    else if (name === `${family}_bucket`) {
      const le = /(?:^|,)le="([^"]*)"/.exec(labels ?? "")?.[1];
      if (le === undefined) continue;
      const bound = le === "+Inf" ? Infinity : Number(le);
      byBound.set(bound, (byBound.get(bound) ?? 0) + value);
    }
  }
  if (byBound.size === 0) return null;
  const bounds = [...byBound.keys()].sort((a, b) => a - b);
  return { bounds, cumulative: bounds.map((b) => byBound.get(b)!), sum, count };
}

/** The mask histograms of a /metrics text, or null when the server exposes none (not LMPool). */
export function maskHistogramsOf(metricsText: string): MaskHistograms | null {
  const lines = metricsText.split("\n").filter((l) => l.startsWith("lmpool_structured_output_"));
  const mask = summed(lines, FAMILIES.mask), exposed = summed(lines, FAMILIES.exposed);
  return mask && exposed ? { mask, exposed } : null;
}

/** Scrapes `baseUrl`/metrics for the mask histograms; null when it does not answer or has none. */
export async function scrapeMaskHistograms(baseUrl: string): Promise<MaskHistograms | null> {
  try {
    const res = await fetch(`${baseUrl.replace(/\/$/, "")}/metrics`, { signal: AbortSignal.timeout(10_000) });
    return res.ok ? maskHistogramsOf(await res.text()) : null;
  } catch {
    return null;
  }
}

function minus(a: SummedHistogram, b: SummedHistogram): SummedHistogram {
  if (a.bounds.join() !== b.bounds.join()) throw new RangeError("mask histograms changed buckets during the run");
  return {
    bounds: a.bounds,
    cumulative: a.cumulative.map((n, i) => n - b.cumulative[i]!),
    sum: a.sum - b.sum,
    count: a.count - b.count,
  };
}

/** What the run added between two scrapes. */
export function maskTimeSummary(before: MaskHistograms, after: MaskHistograms): MaskTimeSummary {
  const mask = minus(after.mask, before.mask), exposed = minus(after.exposed, before.exposed);
  const ms = (h: SummedHistogram) => ({
    mean: h.count > 0 ? (1e3 * h.sum) / h.count : Number.NaN,
    p99: 1e3 * histogramQuantile(h, 0.99),
  });
  const m = ms(mask), e = ms(exposed);
  return {
    steps: mask.count,
    meanMs: m.mean,
    p99Ms: m.p99,
    exposedMeanMs: e.mean,
    exposedP99Ms: e.p99,
    hiddenShare: mask.sum > 0 ? 1 - exposed.sum / mask.sum : Number.NaN,
  };
}

/** The report's line. */
export function formatMaskTimes(s: MaskTimeSummary | null): string {
  if (!s) return "structured-output masks: not reported by the server (no lmpool_structured_output_* families)";
  if (s.steps === 0) return "structured-output masks: no step had a constrained request";
  const f = (x: number) => x.toFixed(3);
  return `structured-output masks: ${s.steps} steps with constrained requests, mask time per step mean ${
    f(s.meanMs)
  } ms, p99 ${f(s.p99Ms)} ms (p99 from buckets 1-1.5-2-3-5-7 per decade); the forward pass hid ${
    (100 * s.hiddenShare).toFixed(1)
  }% of it (not hidden per step: mean ${f(s.exposedMeanMs)} ms, p99 ${f(s.exposedP99Ms)} ms)`;
}
