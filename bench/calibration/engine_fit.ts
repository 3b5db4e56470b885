/**
 * Fits the engine model of engine_profile.ts to measured steps. Every coefficient but the knee
 * enters linearly, so for a given knee the fit is non-negative least squares (nnls.ts); the knee
 * is chosen from a grid (0, then 16 tokens up to the largest measured step in quarter-octaves,
 * plus every measured step's token count) as the one with the least residual.
 *
 * The residual is relative: each point's row is divided by its measured time, so a 0.6 ms decode
 * step weighs as much as a 100 ms prefill. Decode steps are most of what a serving engine runs,
 * and an absolute fit would trade their accuracy for a few percent on the longest prefill chunks.
 * @module
 */
import {
  type EngineCoefficients,
  type FitPoint,
  type MeasuredRange,
  stepCostOf,
  type StepWork,
} from "./engine_profile.ts";
import { nnls } from "./nnls.ts";

/** One measured step to fit. */
export interface FitInput {
  label: string;
  kind: FitPoint["kind"];
  work: StepWork;
  /** Measured device time, ms (> 0). */
  ms: number;
}

/** A fit and how well it matches its own points. */
export interface EngineFit {
  coefficients: EngineCoefficients;
  points: FitPoint[];
  /** Mean and max of |predicted - measured| / measured over the points, percent. */
  meanAbsErrorPct: number;
  maxAbsErrorPct: number;
  range: MeasuredRange;
}

/** The coefficient each feature column multiplies, in column order. */
const COLUMNS = ["fixedMs", "decodeSeqMs", "prefillSeqMs", "tokenMs", "kvReadMs", "pairMs"] as const;

/** The model's features of a step for a given knee, in {@link COLUMNS} order. */
function features(w: StepWork, kneeTokens: number): number[] {
  const tokens = w.decodeSeqs + w.prefillTokens;
  return [1, w.decodeSeqs, w.prefillSeqs, Math.max(0, tokens - kneeTokens), w.decodeContext, w.prefillPairs];
}

/** Knees to try: 0, 16 * 2^(i/4) up to the largest step, and every measured step's tokens. */
function kneeCandidates(points: readonly FitInput[]): number[] {
  const tokens = points.map((p) => p.work.decodeSeqs + p.work.prefillTokens);
  const maxTokens = Math.max(...tokens);
  const grid = [0];
  for (let i = 0; 16 * 2 ** (i / 4) <= maxTokens; i++) grid.push(Math.round(16 * 2 ** (i / 4)));
  return [...new Set([...grid, ...tokens])].sort((a, b) => a - b);
}

/** Non-negative coefficients for one knee, and the relative residual norm. */
function fitForKnee(points: readonly FitInput[], knee: number): { coefficients: EngineCoefficients; residual: number } {
  const rows = points.map((p) => features(p.work, knee).map((f) => f / p.ms));
  // Columns scaled to a max of 1 so the solver's tolerances mean the same for every coefficient.
  const scale = COLUMNS.map((_, j) => Math.max(...rows.map((r) => Math.abs(r[j]!))) || 1);
  const scaled = rows.map((r) => r.map((v, j) => v / scale[j]!));
  const { x, residualNorm } = nnls(scaled, points.map(() => 1));
  const c = Object.fromEntries(COLUMNS.map((name, j) => [name, x[j]! / scale[j]!])) as Omit<
    EngineCoefficients,
    "kneeTokens"
  >;
  return { coefficients: { ...c, kneeTokens: knee }, residual: residualNorm };
}

/** Fits the engine model to measured steps (at least 3, each with a positive time). */
export function fitEngineModel(points: readonly FitInput[]): EngineFit {
  if (points.length < 3) throw new RangeError(`the engine fit needs at least 3 measured steps, got ${points.length}`);
  for (const p of points) {
    if (!(Number.isFinite(p.ms) && p.ms > 0)) throw new RangeError(`${p.label}: measured ms must be > 0, got ${p.ms}`);
  }
  let best: { coefficients: EngineCoefficients; residual: number } | null = null;
  for (const knee of kneeCandidates(points)) {
    const f = fitForKnee(points, knee);
    if (best === null || f.residual < best.residual * (1 - 1e-9)) best = f;
  }
  return evaluateFit(best!.coefficients, points);
}

/** How coefficients `c` predict `points`: the per-point table, error summary and measured range. */
export function evaluateFit(c: EngineCoefficients, points: readonly FitInput[]): EngineFit {
  const fitted: FitPoint[] = points.map((p) => ({
    label: p.label,
    kind: p.kind,
    work: { ...p.work },
    measuredMs: p.ms,
    predictedMs: stepCostOf(c, p.work).totalMs,
  }));
  const errors = fitted.map((p) => Math.abs(p.predictedMs - p.measuredMs) / p.measuredMs * 100);
  const max = (f: (w: StepWork) => number) => Math.max(0, ...points.map((p) => f(p.work)));
  return {
    coefficients: c,
    points: fitted,
    meanAbsErrorPct: errors.reduce((s, e) => s + e, 0) / Math.max(1, errors.length),
    maxAbsErrorPct: Math.max(0, ...errors),
    range: {
      maxDecodeSeqs: max((w) => w.decodeSeqs),
      maxDecodeContext: max((w) => w.decodeContext),
      maxPrefillTokens: max((w) => w.prefillTokens),
      maxPrefillPairs: max((w) => w.prefillPairs),
      maxStepTokens: max((w) => w.decodeSeqs + w.prefillTokens),
    },
  };
}

/** Signed relative error of a fitted point, percent. */
export function errorPct(p: Pick<FitPoint, "measuredMs" | "predictedMs">): number {
  return ((p.predictedMs - p.measuredMs) / p.measuredMs) * 100;
}
