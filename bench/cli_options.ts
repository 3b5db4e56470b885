/**
 * Command-line options of the benchmark entries: integers, integer lists and GPU lists. A
 * RangeError names the option and the text given.
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

// A decimal digit string only: Number() alone would take "", " ", "0x1" and "1e1".
const DIGITS = /^\d+$/;

/**
 * `--name`'s GPUs as the CUDA device of each rank (LLMEngine's `gpus: number[]`), or `fallback`
 * ranks on devices 0..fallback-1 when it was not given. The text is either a count ("2": ranks on
 * devices 0 and 1) or a comma-separated list of device ids, one per rank, where a repeated id puts
 * several ranks on one device ("0,0": two ranks on device 0; "3,": one rank on device 3).
 */
export function gpusOption(name: string, text: string | undefined, fallback: number): number[] {
  const fail = (): never => {
    throw new RangeError(`--${name} must be a GPU count (e.g. 2) or a comma-separated list of device ids, one per rank (e.g. 0,1 or 0,0), got ${JSON.stringify(text)}`);
  };
  if (text === undefined) return Array.from({ length: fallback }, (_, i) => i);
  const t = text.trim();
  if (!t.includes(",")) {
    if (!DIGITS.test(t)) fail();
    const count = Number(t);
    if (!Number.isSafeInteger(count) || count < 1) fail();
    return Array.from({ length: count }, (_, i) => i);
  }
  // One trailing comma marks a one-entry list ("3,"), which a bare "3" (a count) cannot say.
  const parts = (t.endsWith(",") ? t.slice(0, -1) : t).split(",").map((s) => s.trim());
  if (parts.some((s) => !DIGITS.test(s))) fail();
  const ids = parts.map(Number);
  if (ids.some((x) => !Number.isSafeInteger(x))) fail();
  return ids;
}

/** A GPU list in words for logs and descriptions: "2 GPUs" for devices 0..n-1, else "2 ranks on devices 0,0" or "1 rank on device 3". */
export function describeGpus(gpus: readonly number[]): string {
  const identity = gpus.every((g, i) => g === i);
  if (identity) return `${gpus.length} GPU${gpus.length === 1 ? "" : "s"}`;
  const many = gpus.length === 1 ? "" : "s";
  return `${gpus.length} rank${many} on device${many} ${gpus.join(",")}`;
}
