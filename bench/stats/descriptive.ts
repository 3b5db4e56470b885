/**
 * Mean and sample standard deviation of a list of numbers.
 * @module
 */

/** Throws a RangeError unless every value is a finite number (NaN would silently poison a mean). */
export function assertFinite(values: readonly number[], what: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new RangeError(`${what}[${i}] must be a finite number, got ${String(v)}`);
    }
  }
}

/** Arithmetic mean; NaN for an empty list. */
export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  assertFinite(values, "values");
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Sample variance (n - 1 in the denominator); NaN for fewer than two values. */
export function sampleVariance(values: readonly number[]): number {
  if (values.length < 2) return Number.NaN;
  const m = mean(values);
  let ss = 0;
  for (const v of values) ss += (v - m) * (v - m);
  return ss / (values.length - 1);
}

/** Sample standard deviation (n - 1 in the denominator); NaN for fewer than two values. */
export function stddev(values: readonly number[]): number {
  return Math.sqrt(sampleVariance(values));
}
