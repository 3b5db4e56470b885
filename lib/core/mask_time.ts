/**
 * Per-step time of structured-output masks, and how much of it the device's forward pass hides.
 * The model runner computes a step's masks on the host while the device runs that step's forward
 * pass (the native sampling waits for them: lp_step_launch_sampling in lmpool.h). Per step with
 * constrained rows it measures:
 * - mask time: host wall time computing the masks of the step's constrained rows and joining
 *   them to their rows' controls;
 * - exposed time: the part of the mask time the forward pass did not hide, min(mask, wait), where
 *   wait is how long the device stood idle between the forward pass's end and the sampling's
 *   enqueue (lp_model_last_sampling_wait_ms: device events on CUDA). The wait also covers the
 *   host's packing of the controls and the call, so exposed time errs high, never low; where
 *   masks are computed before the launch (a model without the deferred launch) it is the whole
 *   mask time. Hidden time is mask less exposed.
 * A worker keeps both as cumulative histograms and reports them flat among its numeric stats
 * counters, as iteration_tokens.ts does; the server renders them as Prometheus histograms.
 * @module
 */
import { FlatHistogram, type FlatHistogramCounts, flatHistogramOf } from "./flat_histogram.ts";

/** One step's masks (ms). */
export interface StepMaskTime {
  /** Constrained rows whose masks the step computed. */
  rows: number;
  maskMs: number;
  /** The part of maskMs the forward pass hid, in [0, maskMs]. */
  hiddenMs: number;
}

/**
 * Bucket upper bounds in seconds: 1, 1.5, 2, 3, 5 and 7 per decade from 10 us to 1 s (adjacent
 * bounds at most 1.67x apart, the resolution of a percentile read from them), then +Inf.
 */
export const MASK_TIME_BUCKETS: readonly number[] = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
  .flatMap((d) => [1, 1.5, 2, 3, 5, 7].map((m) => Number((m * d).toPrecision(2))))
  .concat([1]);

/** The two histograms' names among the stats counters (and in the server's families). */
export const MASK_TIME_KINDS = ["mask_seconds", "mask_exposed_seconds"] as const;
export type MaskTimeKind = typeof MASK_TIME_KINDS[number];

/** Per-bucket counts (not cumulative; the last is +Inf) and the sum, in seconds. */
export type MaskTimeCounts = FlatHistogramCounts;

/** The flat stats counters of {@link MaskTimeHistogram.counters}. */
export type MaskTimeCounters = { [key: `mask_${string}`]: number };

/** Cumulative mask times of one worker's steps with constrained rows. */
export class MaskTimeHistogram {
  readonly #mask = new FlatHistogram("mask_seconds", MASK_TIME_BUCKETS);
  readonly #exposed = new FlatHistogram("mask_exposed_seconds", MASK_TIME_BUCKETS);

  /** Counts one step's masks. */
  observe(t: StepMaskTime): void {
    const hidden = Math.min(Math.max(t.hiddenMs, 0), t.maskMs);
    this.#mask.observe(t.maskMs / 1e3);
    this.#exposed.observe((t.maskMs - hidden) / 1e3);
  }

  /** The counts as flat numeric counters: `<kind>_bucket_<i>` and `<kind>_sum`. */
  counters(): MaskTimeCounters {
    return this.#exposed.counters(this.#mask.counters()) as MaskTimeCounters;
  }
}

/** One histogram carried by a rank's stats counters, or undefined when it reports none. */
export function maskTimesOf(counters: object, kind: MaskTimeKind): MaskTimeCounts | undefined {
  return flatHistogramOf(counters, kind, MASK_TIME_BUCKETS);
}
