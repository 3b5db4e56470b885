/**
 * Integer command-line options of the benchmark entries: a RangeError names the option and the
 * text given.
 * @module
 */

/** `--name`'s integer value (at least `min`), or `fallback` when it was not given. */
export function intOption(name: string, text: string | undefined, fallback: number, min = 1): number {
  if (text === undefined) return fallback;
  const v = Number(text);
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RangeError(`--${name} must be ${min === 1 ? "a positive integer" : `an integer >= ${min}`}, got ${JSON.stringify(text)}`);
  }
  return v;
}

/** `--name`'s comma-separated list of integers >= 0 ("1,2,4"). */
export function intListOption(name: string, text: string): number[] {
  const xs = text.split(",").map((s) => Number(s.trim()));
  if (xs.some((x) => !Number.isSafeInteger(x) || x < 0)) throw new RangeError(`--${name} must be a comma-separated list of integers, got ${JSON.stringify(text)}`);
  return xs;
}
