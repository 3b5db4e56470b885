/**
 * The Student-t distribution: CDF through the regularized incomplete beta function and an exact
 * quantile by inverting that CDF numerically (bisection to double precision, no lookup table).
 * @module
 */
import { regularizedIncompleteBeta } from "./incomplete_beta.ts";

function checkDf(df: number): void {
  if (typeof df !== "number" || !(df > 0) || !Number.isFinite(df)) {
    throw new RangeError(`degrees of freedom must be a finite number > 0, got ${String(df)}`);
  }
}

/** P(T <= t) for T ~ Student-t with `df` degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  checkDf(df);
  if (Number.isNaN(t)) throw new RangeError("t must be a number, got NaN");
  if (t === Infinity) return 1;
  if (t === -Infinity) return 0;
  // P(|T| > |t|) = I_{df/(df+t^2)}(df/2, 1/2).
  const tail = 0.5 * regularizedIncompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t > 0 ? 1 - tail : tail;
}

/** The p-quantile (0 < p < 1) of Student-t with `df` degrees of freedom: t with P(T <= t) = p. */
export function studentTQuantile(p: number, df: number): number {
  checkDf(df);
  if (typeof p !== "number" || !(p > 0 && p < 1)) {
    throw new RangeError(`quantile probability must be in (0, 1), got ${String(p)}`);
  }
  if (p === 0.5) return 0;
  if (p < 0.5) return -studentTQuantile(1 - p, df);
  // Solve I_x(df/2, 1/2) = 2(1 - p) for x; I_x is increasing in x, so bisection always converges.
  // Then t = sqrt(df (1 - x) / x). Working in x avoids bracketing an unbounded t.
  const target = 2 * (1 - p);
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 2000 && hi - lo > 1e-17 * hi; i++) {
    const mid = lo + (hi - lo) / 2;
    if (mid === lo || mid === hi) break;
    if (regularizedIncompleteBeta(mid, df / 2, 0.5) < target) lo = mid;
    else hi = mid;
  }
  const x = lo + (hi - lo) / 2;
  return Math.sqrt((df * (1 - x)) / x);
}
