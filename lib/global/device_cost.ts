/**
 * What a GPU's step costs, as the control plane prices routes: the engine model `bun bench
 * calibrate` fits (bench/calibration/engine_profile.ts), reduced to the terms routing needs, plus
 * each rank's measured speed against it. A prefill of n tokens after c cached ones costs
 * n * prefillTokenMs + chunkPairs(c, n) * prefillPairMs; a decode step of s sequences reading k
 * context tokens costs stepFixedMs + s * decodeSeqMs + k * kvReadMs. Workers report cumulative
 * timings of their pure prefill and pure decode steps with those steps' work; the ratio of
 * measured to modelled time, per rank and kind, scales the model (so a GPU slower or faster than
 * its calibration, or one time-sliced between two ranks, is priced as it runs).
 * @module
 */
import { chunkPairs } from "../core/attention_pairs.ts";

/** Step-cost coefficients, device milliseconds. */
export interface DeviceCostModel {
  /** Per prompt token prefilled (the GEMMs, compute-bound). */
  prefillTokenMs: number;
  /** Per causal attention (query, key) pair of a prefill. */
  prefillPairMs: number;
  /** Fixed cost of a step (launch, reading the weights once). */
  stepFixedMs: number;
  /** Per sequence in a decode step. */
  decodeSeqMs: number;
  /** Per context token a decoding sequence reads. */
  kvReadMs: number;
}

/**
 * The H200 + Qwen3-0.6B coefficients of the checked-in engine profile
 * (bench/calibration/profiles/h200-qwen3-0.6b.json); other GPUs and models are priced through the
 * measured speed ratios until a profile for them is given.
 */
export const DEFAULT_DEVICE_COST: Readonly<DeviceCostModel> = Object.freeze({
  prefillTokenMs: 0.0015,
  prefillPairMs: 1.28e-6,
  stepFixedMs: 0.81,
  decodeSeqMs: 0.0018,
  kvReadMs: 3.51e-5,
});

/** Modelled prefill time of `tokens` tokens after `cached` ones, ms (unscaled). */
export function prefillMs(m: DeviceCostModel, tokens: number, cached: number): number {
  if (tokens <= 0) return 0;
  return tokens * m.prefillTokenMs + chunkPairs(cached, tokens) * m.prefillPairMs;
}

/** Modelled decode step time for `seqs` sequences reading `context` tokens, ms (unscaled). */
export function decodeStepMs(m: DeviceCostModel, seqs: number, context: number): number {
  if (seqs <= 0) return 0;
  return m.stepFixedMs + seqs * m.decodeSeqMs + context * m.kvReadMs;
}

/** Cumulative step timings a worker reports (stats counters), by kind. */
const PREFILL_KEYS = ["prefill_ms", "prefill_tokens", "prefill_pairs"] as const;
const DECODE_KEYS = ["decode_ms", "decode_steps", "decode_seqs", "decode_context"] as const;

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

/** Per-rank speed of prefill and decode against the model. */
export class DeviceSpeeds {
  readonly model: DeviceCostModel;
  readonly #prefill = new Map<number, number>();
  readonly #decode = new Map<number, number>();
  /** The counters each ratio was last folded from, per rank and kind. */
  readonly #last = new Map<string, Record<string, number>>();

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

  /** Measured / modelled decode time on `rank`, as {@link prefillRatio}. */
  decodeRatio(rank: number): number {
    return this.#decode.get(rank) ?? meanOf(this.#decode);
  }

  /** Folds in a worker's cumulative counters (those without step timings change nothing). */
  observe(rank: number, counters: Record<string, number>): void {
    const m = this.model;
    this.#fold(this.#prefill, rank, "prefill", counters, PREFILL_KEYS, (d) =>
      // Pairs price the attention, tokens the GEMMs.
      d.prefill_tokens! * m.prefillTokenMs + d.prefill_pairs! * m.prefillPairMs);
    this.#fold(
      this.#decode,
      rank,
      "decode",
      counters,
      DECODE_KEYS,
      (d) => d.decode_steps! * m.stepFixedMs + d.decode_seqs! * m.decodeSeqMs + d.decode_context! * m.kvReadMs,
    );
  }

  /** A rank left: its next incarnation reports from zero. */
  forget(rank: number): void {
    this.#prefill.delete(rank);
    this.#decode.delete(rank);
    this.#last.delete(`${rank}/prefill`);
    this.#last.delete(`${rank}/decode`);
  }

  /**
   * Folds the steps since the counters last folded for this kind: a report covering too few
   * modelled milliseconds waits to be counted with the next one; counters that went back (a new
   * worker) start over.
   */
  #fold(
    into: Map<number, number>,
    rank: number,
    kind: string,
    counters: Record<string, number>,
    keys: readonly string[],
    modelledOf: (delta: Record<string, number>) => number,
  ): void {
    if (!keys.every((k) => typeof counters[k] === "number")) return;
    const key = `${rank}/${kind}`;
    const last = this.#last.get(key);
    const delta: Record<string, number> = {};
    for (const k of keys) delta[k] = counters[k]! - (last?.[k] ?? 0);
    if (keys.some((k) => delta[k]! < 0)) {
      this.#last.set(key, { ...counters });
      return;
    }
    const modelled = modelledOf(delta);
    const measured = delta[keys[0]!]!;
    if (!(modelled >= MIN_MODELLED_MS)) return;
    this.#last.set(key, { ...counters });
    if (!(measured > 0)) return;
    const r = Math.min(MAX_RATIO, Math.max(MIN_RATIO, measured / modelled));
    const prev = into.get(rank);
    into.set(rank, prev === undefined ? r : prev + ALPHA * (r - prev));
  }
}
