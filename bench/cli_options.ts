/**
 * Command-line options of the benchmark entries: integers, numbers, integer lists and GPU lists. A
 * RangeError names the option and the text given.
 * @module
 */
import { gpuDevices, parseGpuList } from "../lib/core/gpu_list.ts";

/** `--name`'s integer value (at least `min`), or `fallback` when it was not given. */
export function intOption(name: string, text: string | undefined, fallback: number, min = 1): number {
  if (text === undefined) return fallback;
  const v = Number(text);
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RangeError(
      `--${name} must be ${min === 1 ? "a positive integer" : `an integer >= ${min}`}, got ${JSON.stringify(text)}`,
    );
  }
  return v;
}

/** `--name`'s number value (at least `min`, or above it when `exclusive`), or undefined when it was not given. */
export function numberOption(
  name: string,
  text: string | undefined,
  min: number,
  exclusive = false,
): number | undefined {
  if (text === undefined) return undefined;
  // Number() alone would take "" and " " as 0.
  const v = text.trim() === "" ? Number.NaN : Number(text);
  if (!Number.isFinite(v) || v < min || (exclusive && v === min)) {
    throw new RangeError(`--${name} must be a number ${exclusive ? ">" : ">="} ${min}, got ${JSON.stringify(text)}`);
  }
  return v;
}

/** `--name`'s comma-separated list of integers >= 0 ("1,2,4"). */
export function intListOption(name: string, text: string): number[] {
  const xs = text.split(",").map((s) => Number(s.trim()));
  if (xs.some((x) => !Number.isSafeInteger(x) || x < 0)) {
    throw new RangeError(`--${name} must be a comma-separated list of integers, got ${JSON.stringify(text)}`);
  }
  return xs;
}

/** `--<name>`: a GPU count or each rank's device (lib/core/gpu_list.ts); `fallback` GPUs when absent. */
export function gpusOption(name: string, text: string | undefined, fallback: number): number[] {
  return gpuDevices(text === undefined ? fallback : parseGpuList(name, text));
}

/** A GPU list in words for logs and descriptions: "2 GPUs" for devices 0..n-1, else "2 ranks on devices 0,0" or "1 rank on device 3". */
export function describeGpus(gpus: readonly number[]): string {
  const identity = gpus.every((g, i) => g === i);
  if (identity) return `${gpus.length} GPU${gpus.length === 1 ? "" : "s"}`;
  const many = gpus.length === 1 ? "" : "s";
  return `${gpus.length} rank${many} on device${many} ${gpus.join(",")}`;
}
