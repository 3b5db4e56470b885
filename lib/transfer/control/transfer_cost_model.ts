/**
 * The transfer cost model: estimated dispatch-to-publish time of a plan and the prefill time it
 * saves. The pair's data path (reported by its workers, see pair_data_paths.ts) decides the static
 * estimate: a direct path between two devices (NVLink: CUDA IPC or NCCL) uses the measured profile,
 * residual_P95(pair, size bucket) + interference x data_path_P95(pair, bytes) with the data-path
 * term interpolated on payload bytes, or without one a cold-start scalar (fixed latency + bytes /
 * bandwidth, defaults from the H200 copy-engine measurement); the device-local path (two ranks of
 * one device, a device-to-device copy) has its own scalar, deviceLocalFixedMs + bytes /
 * deviceLocalBytesPerMs, never the profile (whose curves are links between devices); the host path
 * (gather to host memory, worker-to-worker socket, scatter) has its own, far slower scalar. Each is
 * a prior only: completed plans replace it with what they measured (below).
 *
 * Phase waits (the interference term, made explicit): a worker whose steps hold its thread (the CPU
 * backend) reads phase messages only between steps, so each phase waits for the current step of a
 * busy rank to end; a worker that reports reads_during_steps (CUDA: the device computes the step
 * while the thread reads messages) makes none wait, and its w(r) is 0.
 * Workers report that residual as step_wait_ms (E[s^2] / (2 E[s]) while stepping, 0 while idle;
 * lib/transfer/worker/step_wait_estimator.ts). Prepare and execute need both ranks' acks, publish the
 * destination's, so with w(r) the wait of rank r:
 *   waitMs = 2 x max(w(src), w(dst)) + w(dst)
 * w(r) is the larger of the reported step_wait_ms and, when the planner says how much prefill is
 * queued on r (q tokens), half the step that prefill is about to run: min(q, the rank's step token
 * budget) x prefill ms per token / 2. A report lags a burst of routes; the queue does not.
 *   ms     = base + waitMs
 * where base is the observed excess EWMA of the pair and size bucket when there is one, else the
 * profile or cold-start estimate above. Observed transactions teach the excess, the dispatch-to-
 * publish time beyond the wait the plan's estimate predicted (max(0, publishMs - plan waitMs)), so
 * the learned part does not double-count a wait that is priced from current load at every estimate
 * (correcting the base upward or downward); a plan that ran out of time counts as at least the time
 * it took beyond its predicted wait, so a path slower than its estimate stops being admitted instead
 * of timing out again and again. Saved prefill is tokens x prefill ms per token, updated from
 * worker step timings.
 *
 * Profile JSON: what `bun bench transfer` writes (schema "lmpool.transfer-profile/v1", see
 * bench/transfer_profile.ts; its default path's curve per directed device pair is used, device ids
 * taken as ranks), or the compact form `{ "blockBytes": 29360128, "pairs": { "0->1": { "1": 0.21,
 * "8": 0.6, "64": 3.1 } } }` mapping plan blocks to P95 ms (`src->dst` directed, `a-b` both ways). Residuals JSON: `{ "pairs": { "0->1": { "1": 0.3, "8": 0.4 } } }`
 * maps size buckets (1, 2, 4, 8, ...: the largest power of two <= blocks) to P95 residual ms.
 * @module
 */
import { readText } from "../../runtime/files.ts";
import { DEVICE_LOCAL_PATH, PairDataPaths } from "./pair_data_paths.ts";
import type { TransferConfig } from "./transfer_config.ts";

/** A measured latency curve of one directed pair: payload bytes -> P95 ms, ascending. */
export interface LatencyCurve {
  bytes: number[];
  p95Ms: number[];
}

/** A parsed latency profile. */
export interface TransferProfile {
  /** KV bytes per block the profile was measured with. */
  blockBytes: number;
  /** Curves by directed pair key "src->dst". */
  pairs: Map<string, LatencyCurve>;
}

/** The directed pair key "src->dst". */
export function pairKey(src: number, dst: number): string {
  return `${src}->${dst}`;
}

/** Size bucket of a plan: the largest power of two <= blocks (1, 2, 4, ...). */
export function sizeBucket(blocks: number): number {
  if (!Number.isInteger(blocks) || blocks < 1) {
    throw new RangeError(`plan size must be an integer >= 1 block, got ${blocks}`);
  }
  return 2 ** Math.floor(Math.log2(blocks));
}

/** Expands "a-b" (both directions) and "a->b" keys; throws RangeError naming a bad key. */
function directedKeys(key: string): string[] {
  const directed = /^(\d+)->(\d+)$/.exec(key);
  if (directed) return [pairKey(Number(directed[1]), Number(directed[2]))];
  const both = /^(\d+)-(\d+)$/.exec(key);
  if (both) return [pairKey(Number(both[1]), Number(both[2])), pairKey(Number(both[2]), Number(both[1]))];
  throw new RangeError(`transfer profile pair key ${JSON.stringify(key)} is neither "src->dst" nor "a-b"`);
}

/** Reads `{ "<blocks or bucket>": ms }` into ascending [key, ms] rows. */
function readSizeTable(where: string, table: unknown): [number, number][] {
  if (typeof table !== "object" || table === null) {
    throw new RangeError(`${where} must be an object of blocks -> ms, got ${JSON.stringify(table)}`);
  }
  const rows = Object.entries(table as Record<string, unknown>).map(([k, v]): [number, number] => {
    const n = Number(k);
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(`${where}: size ${JSON.stringify(k)} is not a block count >= 1`);
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(`${where}[${k}] must be a finite ms >= 0, got ${JSON.stringify(v)}`);
    }
    return [n, v];
  });
  if (rows.length === 0) throw new RangeError(`${where} has no sizes`);
  return rows.sort((a, b) => a[0] - b[0]);
}

/** The benchmark's profile schema (bench/transfer_profile.ts), as far as the cost model reads it. */
const BENCH_SCHEMA = "lmpool.transfer-profile/v1";
interface BenchProfile {
  bytesPerBlock: number;
  defaultPath: string;
  pairs: {
    srcDevice: number;
    dstDevice: number;
    paths: { path: string; points: { blocks: number; p95Ms: number }[] }[];
  }[];
}

/** The compact form of a benchmark profile: its default path's P95 curve per directed pair. */
function fromBenchProfile(p: BenchProfile): { blockBytes: number; pairs: Record<string, Record<string, number>> } {
  if (!Array.isArray(p.pairs)) throw new RangeError(`transfer profile (${BENCH_SCHEMA}) needs a pairs array`);
  const pairs: Record<string, Record<string, number>> = {};
  for (const pair of p.pairs) {
    const curve = pair.paths?.find((c) => c.path === p.defaultPath);
    if (!curve) {
      throw new RangeError(`transfer profile has no ${p.defaultPath} curve for ${pair.srcDevice} -> ${pair.dstDevice}`);
    }
    pairs[pairKey(pair.srcDevice, pair.dstDevice)] = Object.fromEntries(
      curve.points.map((pt) => [String(pt.blocks), pt.p95Ms]),
    );
  }
  return { blockBytes: p.bytesPerBlock, pairs };
}

/** Parses and validates a profile JSON value (see the module doc). */
export function parseTransferProfile(json: unknown): TransferProfile {
  if ((json as { schema?: unknown })?.schema === BENCH_SCHEMA) json = fromBenchProfile(json as BenchProfile);
  const o = json as { blockBytes?: unknown; pairs?: unknown };
  if (typeof o !== "object" || o === null) {
    throw new RangeError(`transfer profile must be an object, got ${JSON.stringify(json)}`);
  }
  if (typeof o.blockBytes !== "number" || !(o.blockBytes > 0)) {
    throw new RangeError(`transfer profile blockBytes must be > 0, got ${JSON.stringify(o.blockBytes)}`);
  }
  if (typeof o.pairs !== "object" || o.pairs === null) throw new RangeError("transfer profile needs a pairs object");
  const pairs = new Map<string, LatencyCurve>();
  for (const [key, table] of Object.entries(o.pairs as Record<string, unknown>)) {
    const rows = readSizeTable(`transfer profile pair ${key}`, table);
    const curve = { bytes: rows.map(([n]) => n * (o.blockBytes as number)), p95Ms: rows.map(([, ms]) => ms) };
    for (const k of directedKeys(key)) pairs.set(k, curve);
  }
  return { blockBytes: o.blockBytes, pairs };
}

/** Parses calibration residuals: directed pair -> size bucket -> P95 residual ms. */
export function parseResiduals(json: unknown): Map<string, Map<number, number>> {
  const pairs = (json as { pairs?: unknown })?.pairs;
  if (typeof pairs !== "object" || pairs === null) {
    throw new RangeError(`transfer residuals need a pairs object, got ${JSON.stringify(json)}`);
  }
  const out = new Map<string, Map<number, number>>();
  for (const [key, table] of Object.entries(pairs as Record<string, unknown>)) {
    const rows = new Map(readSizeTable(`transfer residuals pair ${key}`, table).map(([n, ms]) => [sizeBucket(n), ms]));
    for (const k of directedKeys(key)) out.set(k, rows);
  }
  return out;
}

/** A JSON value given inline or as a file path. */
function loadJson(v: unknown, what: string): unknown {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(readText(v));
  } catch (e) {
    throw new RangeError(`cannot read the transfer ${what} ${JSON.stringify(v)}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}

/** P95 ms at `bytes` on a curve: linear between points, flat below, last slope above. */
export function interpolateCurve(c: LatencyCurve, bytes: number): number {
  const n = c.bytes.length;
  if (bytes <= c.bytes[0]!) return c.p95Ms[0]!;
  for (let i = 1; i < n; i++) {
    if (bytes <= c.bytes[i]!) {
      const t = (bytes - c.bytes[i - 1]!) / (c.bytes[i]! - c.bytes[i - 1]!);
      return c.p95Ms[i - 1]! + t * (c.p95Ms[i]! - c.p95Ms[i - 1]!);
    }
  }
  // Above the largest measured plan the link is bandwidth-bound: extend the last segment.
  const x0 = n > 1 ? c.bytes[n - 2]! : 0;
  const y0 = n > 1 ? c.p95Ms[n - 2]! : 0;
  const slope = (c.p95Ms[n - 1]! - y0) / (c.bytes[n - 1]! - x0);
  return c.p95Ms[n - 1]! + Math.max(0, slope) * (bytes - c.bytes[n - 1]!);
}

/**
 * Where an estimate came from: EWMA of this pair and size, the profile, or a cold-start scalar
 * (direct, device-local or host path).
 */
export type EstimateSource = "observed" | "profile" | "fallback" | "device-local-fallback" | "host-fallback";

/** Estimated cost of one plan. */
export interface TransferEstimate {
  /** Dispatch-to-publish ms: the base (per `source`) plus waitMs. */
  ms: number;
  /** Where the base came from. */
  source: EstimateSource;
  bytes: number;
  /** The phase-wait part of ms: 2 x max(w(src), w(dst)) + w(dst), from the ranks' step_wait_ms. */
  waitMs: number;
}

/** Static profile + calibration residuals + online EWMAs, and prefill time per token. */
export class TransferCostModel {
  readonly profile: TransferProfile | undefined;
  /** The data path of each pair, from worker stats. */
  readonly paths = new PairDataPaths();
  readonly #residuals: Map<string, Map<number, number>>;
  readonly #config: TransferConfig;
  /** Dispatch-to-publish time beyond the predicted phase wait, and source-transfer EWMAs, keyed "src->dst#bucket". */
  readonly #publishEwma = new Map<string, number>();
  readonly #sourceEwma = new Map<string, number>();
  readonly #prefillMsPerToken = new Map<number, number>();
  readonly #lastTimings = new Map<number, { tokens: number; ms: number }>();
  /** Each rank's latest step_wait_ms (absent: idle, or never reported). */
  readonly #stepWaitMs = new Map<number, number>();
  readonly #stepBudget = new Map<number, number>();
  /** Ranks whose phase messages never wait for a step (reads_during_steps). */
  readonly #readsDuringSteps = new Set<number>();

  constructor(config: TransferConfig) {
    this.#config = config;
    this.profile = config.profile === undefined ? undefined : parseTransferProfile(loadJson(config.profile, "profile"));
    this.#residuals = config.residuals === undefined
      ? new Map()
      : parseResiduals(loadJson(config.residuals, "residuals"));
  }

  /** True when the profile was measured with `blockBytes` per block (else it is rescaled on bytes). */
  profileMatches(blockBytes: number): boolean {
    return this.profile === undefined || this.profile.blockBytes === blockBytes;
  }

  /**
   * Estimated dispatch-to-publish ms of moving `blocks` blocks of `blockBytes` from src to dst:
   * the base (observed excess, profile or fallback) plus the phase wait (see the module doc).
   */
  estimate(
    src: number,
    dst: number,
    blocks: number,
    blockBytes: number,
    queuedTokens?: (rank: number) => number,
  ): TransferEstimate {
    const bytes = blocks * blockBytes;
    const waitMs = this.phaseWaitMs(src, dst, queuedTokens);
    const base = this.#baseEstimate(src, dst, blocks, bytes);
    return { ms: base.ms + waitMs, source: base.source, bytes, waitMs };
  }

  /**
   * Expected time a plan's phases wait for busy ranks: prepare and execute wait for both ranks
   * (the later ack decides), publish for the destination: 2 x max(w(src), w(dst)) + w(dst).
   */
  phaseWaitMs(src: number, dst: number, queuedTokens?: (rank: number) => number): number {
    const w = (
      r: number,
    ) => (this.#readsDuringSteps.has(r)
      ? 0
      : Math.max(this.stepWaitMs(r), queuedTokens ? this.queueWaitMs(r, queuedTokens(r)) : 0));
    const dstWait = w(dst);
    return 2 * Math.max(w(src), dstWait) + dstWait;
  }

  /** Half the step that `queuedTokens` of prefill make `rank` run next (see the module doc). */
  queueWaitMs(rank: number, queuedTokens: number): number {
    if (!(queuedTokens > 0)) return 0;
    const budget = this.#stepBudget.get(rank) ?? queuedTokens;
    return (Math.min(queuedTokens, budget) * this.prefillMsPerToken(rank)) / 2;
  }

  /** Records whether a rank reads phase messages while its steps compute (from its stats push). */
  observeReadsDuringSteps(rank: number, reads: boolean): void {
    if (reads) this.#readsDuringSteps.add(rank);
    else this.#readsDuringSteps.delete(rank);
  }

  /** Records a rank's step token budget (max tokens per step, from its stats push). */
  observeStepBudget(rank: number, tokens: number): void {
    if (Number.isFinite(tokens) && tokens > 0) this.#stepBudget.set(rank, tokens);
  }

  /** A rank's latest reported step_wait_ms (0 when idle or unknown). */
  stepWaitMs(rank: number): number {
    return this.#stepWaitMs.get(rank) ?? 0;
  }

  /** Records a rank's step_wait_ms (from its stats push). */
  observeStepWait(rank: number, ms: number): void {
    if (!Number.isFinite(ms) || ms <= 0) this.#stepWaitMs.delete(rank);
    else this.#stepWaitMs.set(rank, ms);
  }

  /** A rank left: its step wait goes (a restarted worker reports afresh). */
  forgetRank(rank: number): void {
    this.#stepWaitMs.delete(rank);
    this.#stepBudget.delete(rank);
    this.#readsDuringSteps.delete(rank);
  }

  /** The estimate without phase waits. */
  #baseEstimate(src: number, dst: number, blocks: number, bytes: number): { ms: number; source: EstimateSource } {
    const observed = this.#publishEwma.get(`${pairKey(src, dst)}#${sizeBucket(blocks)}`);
    if (observed !== undefined) return { ms: observed, source: "observed" };
    // A profile measures links between devices; it says nothing about a pair that moves through
    // host memory, nor about two ranks of one device, whose copy never leaves that device's memory.
    const path = this.paths.pathOf(src, dst);
    if (path.kind === "host") {
      return { ms: this.#config.hostFixedMs + bytes / this.#config.hostBytesPerMs, source: "host-fallback" };
    }
    if (path.kind === "direct" && path.name === DEVICE_LOCAL_PATH) {
      const c = this.#config;
      return { ms: c.deviceLocalFixedMs + bytes / c.deviceLocalBytesPerMs, source: "device-local-fallback" };
    }
    const curve = this.profile?.pairs.get(pairKey(src, dst));
    if (curve) {
      const residual = this.#residuals.get(pairKey(src, dst))?.get(sizeBucket(blocks)) ?? 0;
      return { ms: residual + this.#config.interferenceFactor * interpolateCurve(curve, bytes), source: "profile" };
    }
    return { ms: this.#config.fallbackFixedMs + bytes / this.#config.fallbackBytesPerMs, source: "fallback" };
  }

  /**
   * Folds in one completed plan: source execute time, and dispatch-to-publish time less the phase
   * wait its estimate predicted (`waitMs`, the plan's; 0 if none), since estimate() adds the
   * current wait on top of what is learned here.
   */
  observe(
    src: number,
    dst: number,
    blocks: number,
    times: { sourceMs?: number; publishMs: number; waitMs?: number },
  ): void {
    const key = `${pairKey(src, dst)}#${sizeBucket(blocks)}`;
    const excess = Math.max(0, times.publishMs - (times.waitMs ?? 0));
    this.#publishEwma.set(key, this.#ewma(this.#publishEwma.get(key), excess));
    if (times.sourceMs !== undefined) this.#sourceEwma.set(key, this.#ewma(this.#sourceEwma.get(key), times.sourceMs));
  }

  /**
   * Folds in a plan that ran out of time after `elapsedMs` (a deadline passed): the transfer costs
   * at least that much beyond the phase wait its estimate predicted (`waitMs`), so the bucket's
   * excess rises to it (never falls). Later completions of that size correct it as usual.
   */
  observeTimeout(src: number, dst: number, blocks: number, elapsedMs: number, waitMs = 0): void {
    const key = `${pairKey(src, dst)}#${sizeBucket(blocks)}`;
    this.#publishEwma.set(key, Math.max(this.#publishEwma.get(key) ?? 0, elapsedMs - waitMs));
  }

  /** Source-transfer EWMA of a pair and size, if observed. */
  observedSourceMs(src: number, dst: number, blocks: number): number | undefined {
    return this.#sourceEwma.get(`${pairKey(src, dst)}#${sizeBucket(blocks)}`);
  }

  /** Prefill ms per token on `rank`: measured when timings arrived, else the configured default. */
  prefillMsPerToken(rank: number): number {
    return this.#prefillMsPerToken.get(rank) ?? this.#config.prefillMsPerToken;
  }

  /** Prefill time `tokens` would cost on `rank`. */
  savedPrefillMs(rank: number, tokens: number): number {
    return tokens * this.prefillMsPerToken(rank);
  }

  /**
   * Folds in a worker's cumulative prefill counters (tokens and native ms). Needs at least 64 new
   * tokens since the last sample, so a tiny step's timer noise does not swing the estimate.
   */
  observePrefillTimings(rank: number, cumulativeTokens: number, cumulativeMs: number): void {
    const last = this.#lastTimings.get(rank);
    if (!last || cumulativeTokens < last.tokens) {
      this.#lastTimings.set(rank, { tokens: cumulativeTokens, ms: cumulativeMs });
      return;
    }
    const dt = cumulativeTokens - last.tokens;
    if (dt < 64) return;
    const perToken = Math.max(0, cumulativeMs - last.ms) / dt;
    this.#prefillMsPerToken.set(rank, this.#ewma(this.#prefillMsPerToken.get(rank), perToken));
    this.#lastTimings.set(rank, { tokens: cumulativeTokens, ms: cumulativeMs });
  }

  /** The cost gate: force admits everything; auto needs saved >= safetyRatio x estimated. */
  admits(savedMs: number, estimatedMs: number): boolean {
    if (this.#config.mode === "force") return true;
    if (this.#config.mode === "off") return false;
    return savedMs >= this.#config.safetyRatio * estimatedMs;
  }

  #ewma(prev: number | undefined, x: number): number {
    return prev === undefined ? x : prev + this.#config.ewmaAlpha * (x - prev);
  }
}
