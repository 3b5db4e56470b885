/**
 * The two number shapes every request field is checked against before it reaches the engine: a
 * finite float32 in a range, and an int32 in a range. The native sampler reads floats as float32 and
 * integers as int32, so a value that is fine as a float64 (1e308, 2^40) must still be refused here:
 * one request with it would otherwise fail the whole batch it lands in.
 * @module
 */
import { z } from "zod";

/** Largest finite float32. */
export const FLOAT32_MAX = 3.4028234663852886e38;
/** Smallest and largest int32. */
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Bounds of one float field; an exclusive bound refuses the bound itself. */
export interface FloatRange {
  min: number;
  max: number;
  minExclusive?: boolean;
  maxExclusive?: boolean;
}

function describeRange(r: FloatRange): string {
  const max = r.max === FLOAT32_MAX ? "3.4e38" : String(r.max);
  return `${r.minExclusive ? "(" : "["}${r.min}, ${max}${r.maxExclusive ? ")" : "]"}`;
}

/** True when `v`, read as the float32 the engine will see, is finite and within `r`. */
export function isFloat32In(v: number, r: FloatRange): boolean {
  const f = Math.fround(v);
  if (!Number.isFinite(f)) return false;
  // The float32 value is what the sampler checks: 1e-50 for top_p rounds to 0, outside (0, 1].
  const aboveMin = r.minExclusive ? f > r.min : f >= r.min;
  const belowMax = r.maxExclusive ? f < r.max : f <= r.max;
  return aboveMin && belowMax;
}

/** A zod number that must be a finite float32 in `r` (default: any finite float32). */
export function float32In(r: Partial<FloatRange> = {}): z.ZodNumber {
  const range: FloatRange = { min: -FLOAT32_MAX, max: FLOAT32_MAX, ...r };
  return z.number().refine((v) => isFloat32In(v, range), {
    error: `must be a finite float32 in ${describeRange(range)}`,
  });
}

/** A zod integer that must be in [min, max], both within int32 (default: the whole int32 range). */
export function int32In(min = INT32_MIN, max = INT32_MAX): z.ZodInt {
  if (!(Number.isInteger(min) && Number.isInteger(max) && INT32_MIN <= min && min <= max && max <= INT32_MAX)) {
    throw new RangeError(`int32In bounds must be int32 with min <= max, got [${min}, ${max}]`);
  }
  return z.int().min(min, { error: `must be an integer in [${min}, ${max}]` }).max(max, {
    error: `must be an integer in [${min}, ${max}]`,
  });
}
