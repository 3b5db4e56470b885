/**
 * Per-rung results of a rate ladder: for each configuration and each rung (a phase of the run, e.g.
 * the shared-prefix ladder's "rung 3 @ 10 req/s"), the offered rate beside what the rung achieved
 * (request/s and output tok/s over the rung's own span), its mean and p99 TTFT, mean TPOT and hit
 * rate, each the mean over complete repetitions with its 95% Student-t half-width.
 * @module
 */
import type { PhaseBreakdown, RunMetrics } from "../driver/aggregate.ts";
import type { LadderRung } from "../driver/ladder_arrival.ts";
import type { ConfigurationResult } from "../driver/repetitions.ts";
import { type ConfidenceInterval, studentTInterval } from "../stats/interval.ts";

/** One configuration's results on one rung. */
export interface RungRow {
  configuration: string;
  phase: string;
  rate: number;
  requests: number;
  /** Complete repetitions the intervals are over. */
  repetitions: number;
  /** Intervals by key: see RUNG_METRICS. */
  intervals: Record<string, ConfidenceInterval>;
}

/** The per-rung scalars, by key, read from one repetition's phase breakdown. */
export const RUNG_METRICS: Readonly<Record<string, (p: PhaseBreakdown) => number>> = {
  completed: (p) => p.requests,
  requestThroughput: (p) => p.requestThroughput,
  outputThroughput: (p) => p.outputThroughput,
  ttftMean: (p) => p.ttftMs.mean,
  ttftP99: (p) => p.ttftMs.p99,
  tpotMean: (p) => p.tpotMs.mean,
  prefixHitRate: (p) => p.prefixHitRate,
  tokenReuse: (p) => p.tokenReuse,
};

/** A repetition's breakdown of `phase`; a one-phase run has no per-phase entry, so the whole run stands for it. */
function phaseOf(m: RunMetrics, phase: string, onlyPhase: boolean): PhaseBreakdown | undefined {
  const p = m.phases[phase];
  if (p) return p;
  return onlyPhase ? m : undefined;
}

/** One row per rung of `config`, intervals over its complete repetitions (none without one). */
export function rungRows(config: ConfigurationResult, rungs: readonly LadderRung[]): RungRow[] {
  const complete = config.repetitions.flatMap((r) => (r.complete && r.metrics ? [r.metrics] : []));
  return rungs.map((rung) => {
    const phases = complete.flatMap((m) => {
      const p = phaseOf(m, rung.phase, rungs.length === 1);
      return p ? [p] : [];
    });
    const intervals: Record<string, ConfidenceInterval> = {};
    if (phases.length > 0) {
      for (const [key, read] of Object.entries(RUNG_METRICS)) {
        const values = phases.map(read).filter((v) => Number.isFinite(v));
        if (values.length > 0) intervals[key] = studentTInterval(values);
      }
    }
    return {
      configuration: config.name,
      phase: rung.phase,
      rate: rung.rate,
      requests: rung.requests,
      repetitions: phases.length,
      intervals,
    };
  });
}
