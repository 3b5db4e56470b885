/**
 * What a GPU's prefill costs, as the control plane prices routes: the engine model `bun bench
 * calibrate` fits (bench/calibration/engine_profile.ts), reduced to the terms routing needs, plus
 * each rank's measured speed against it. A prefill of n > 0 tokens after c cached ones costs
 * prefillSeqMs + n * prefillTokenMs + chunkPairs(c, n) * prefillPairMs (the profile's prefillSeqMs,
 * tokenMs and pairMs). Workers report cumulative timings of their pure prefill steps with those
 * steps' count, sequences, tokens and pairs; the ratio of measured to modelled time, per rank, scales
 * the model (so a GPU slower or faster than its calibration, or one time-sliced between two ranks, is
 * priced as it runs). The modelled time of those steps includes each step's fixed time (stepMs:
 * launches, the weights' read floor) and each sequence's prefillSeqMs: a prefix hit's step is almost
 * all of that, so a ratio taken against tokens and pairs alone reads the share of hits in a rank's
 * steps, not its speed (two ranks of one GPU model would differ by twofold and a route would follow
 * the mix). Workers that report no step or sequence counts are measured against tokens and pairs
 * alone; the ratio then also carries their per-step and per-sequence time.
 * @module
 */
import { chunkPairs } from "../core/attention_pairs.ts";

/** Prefill-cost coefficients, device milliseconds. */
export interface DeviceCostModel {
  /** Per prompt token prefilled (the GEMMs, compute-bound). */
  prefillTokenMs: number;
  /** Per causal attention (query, key) pair of a prefill. */
  prefillPairMs: number;
  /**
   * Per sequence a step prefills (its chunk's own launches, sampling and bookkeeping): next to a
   * prefix hit's few tokens it is most of the hit's prefill.
   */
  prefillSeqMs: number;
  /**
   * Per step, whatever it computes (launches, the weights' read floor, sampling setup): what a pure
   * prefill step measures beyond its sequences' work, which the speed ratio must not read as speed.
   */
  stepMs: number;
}

/**
 * The H200 + Qwen3-0.6B coefficients of the checked-in engine profile
 * (bench/calibration/profiles/h200-qwen3-0.6b.json); other GPUs and models are priced through the
 * measured speed ratios until a profile for them is given.
 */
export const DEFAULT_DEVICE_COST: Readonly<DeviceCostModel> = Object.freeze({
  prefillTokenMs: 0.0015,
  prefillPairMs: 1.28e-6,
  prefillSeqMs: 0.54,
  stepMs: 0.81,
});

/** Modelled prefill time of `tokens` tokens after `cached` ones, ms (unscaled). */
export function prefillMs(m: DeviceCostModel, tokens: number, cached: number): number {
  if (tokens <= 0) return 0;
  return m.prefillSeqMs + tokens * m.prefillTokenMs + chunkPairs(cached, tokens) * m.prefillPairMs;
}

/** The cumulative prefill-step timings a worker reports (stats counters). */
const PREFILL_KEYS = ["prefill_ms", "prefill_tokens", "prefill_pairs"] as const;
/** The prefill steps' count and sequences, where the worker reports them (0 where it does not). */
const PREFILL_SHAPE_KEYS = ["prefill_steps", "prefill_seqs"] as const;
type PrefillKey = (typeof PREFILL_KEYS)[number] | (typeof PREFILL_SHAPE_KEYS)[number];

/** Ratios of measured to modelled step time beyond which a report is taken as noise, not speed. */
const MIN_RATIO = 0.25;
const MAX_RATIO = 4;
/** Weight of a new report's ratio (it covers every step since the previous report). */
const ALPHA = 0.3;
/** Modelled milliseconds a report must cover before its ratio counts (a few steps). */
const MIN_MODELLED_MS = 20;

function meanOf(ratios: ReadonlyMap<number, number>): number {
  if (ratios.size === 0) return 1;
  let sum = 0;
  for (const r of ratios.values()) sum += r;
  return sum / ratios.size;
}

/** Per-rank speed of prefill against the model. */
export class DeviceSpeeds {
  readonly model: DeviceCostModel;
  readonly #prefill = new Map<number, number>();
  /** The counters each rank's ratio was last folded from. */
  readonly #last = new Map<number, Record<string, number>>();

  constructor(model: DeviceCostModel = DEFAULT_DEVICE_COST) {
    this.model = model;
  }

  /**
   * Measured / modelled prefill time on `rank`; before it reported, the mean of the ranks that did
   * (a new or restarted rank runs on the same kind of device as the others), else 1.
   */
  prefillRatio(rank: number): number {
    return this.#prefill.get(rank) ?? meanOf(this.#prefill);
  }

  /**
   * Folds in a worker's cumulative counters (those without prefill timings change nothing): the
   * steps since the counters last folded, unless they cover too few modelled milliseconds (then
   * they wait to be counted with the next report); counters that went back (a new worker) start over.
   */
  observe(rank: number, counters: Record<string, number>): void {
    if (!PREFILL_KEYS.every((k) => typeof counters[k] === "number")) return;
    const last = this.#last.get(rank);
    const delta = (k: PrefillKey) => (counters[k] ?? 0) - (last?.[k] ?? 0);
    if ([...PREFILL_KEYS, ...PREFILL_SHAPE_KEYS].some((k) => delta(k) < 0)) {
      this.#last.set(rank, { ...counters });
      return;
    }
    const m = this.model;
    // Steps price the fixed time, sequences their chunks' own, pairs the attention, tokens the GEMMs.
    const modelled = delta("prefill_steps") * m.stepMs + delta("prefill_seqs") * m.prefillSeqMs +
      delta("prefill_tokens") * m.prefillTokenMs + delta("prefill_pairs") * m.prefillPairMs;
    const measured = delta("prefill_ms");
    if (!(modelled >= MIN_MODELLED_MS)) return;
    this.#last.set(rank, { ...counters });
    if (!(measured > 0)) return;
    const r = Math.min(MAX_RATIO, Math.max(MIN_RATIO, measured / modelled));
    const prev = this.#prefill.get(rank);
    this.#prefill.set(rank, prev === undefined ? r : prev + ALPHA * (r - prev));
  }

  /** A rank left: its next incarnation reports from zero. */
  forget(rank: number): void {
    this.#prefill.delete(rank);
    this.#last.delete(rank);
  }
}
