/**
 * The `--gpus` flag's grammar, shared by the server and the benchmarks: a rank count ("2": ranks
 * on devices 0..n-1) or a comma list of each rank's device, repeats allowed ("0,0": two ranks on
 * device 0; a trailing comma marks a one-entry list, "3,", which a bare "3" cannot say).
 * @module
 */

const DIGITS = /^\d+$/;

/** Parses a GPU count or device list; RangeError naming `--<flag>` and the text on a bad value. */
export function parseGpuList(flag: string, text: string): number | number[] {
  const fail = (): never => {
    throw new RangeError(
      `--${flag} must be a GPU count (e.g. 2) or a comma-separated list of device ids, one per rank (e.g. 0,1 or 0,0), got ${
        JSON.stringify(text)
      }`,
    );
  };
  const t = text.trim();
  if (!t.includes(",")) {
    const count = DIGITS.test(t) ? Number(t) : NaN;
    if (!Number.isSafeInteger(count) || count < 1) fail();
    return count;
  }
  const parts = (t.endsWith(",") ? t.slice(0, -1) : t).split(",").map((s) => s.trim());
  if (parts.some((s) => !DIGITS.test(s))) fail();
  const ids = parts.map(Number);
  if (ids.some((x) => !Number.isSafeInteger(x))) fail();
  return ids;
}

/** Each rank's device: a count n becomes devices 0..n-1. */
export function gpuDevices(gpus: number | readonly number[]): number[] {
  return typeof gpus === "number" ? Array.from({ length: gpus }, (_, i) => i) : [...gpus];
}
