/**
 * One simulated data-plane worker: the real local Scheduler, BlockManager (prefix cache, reclamation
 * order, preemption), StepBudget, StopChecker and TransferExecutor, with the model runner replaced by
 * the calibrated engine model. Each step is scheduled exactly as a worker schedules it; its duration
 * is the model's prediction for its shape (device time on the shared GPU, then the host's per-step
 * time), after which the step completes as in LocalEngine: computed counts advance, blocks are
 * committed, one token is appended per sampling row, stop checks run, and the block delta goes to
 * the control plane with the request ids it reflects (as WorkerHost reports them).
 * @module
 */
import type { BlockHash } from "../../lib/core/block_hash.ts";
import type { RankLoad } from "../../lib/core/block_snapshot.ts";
import type { BlockDelta, BlockSnapshot } from "../../lib/core/block_snapshot.ts";
import type { ReflectedRequests } from "../../lib/global/global_scheduler.ts";
import { Sequence } from "../../lib/core/sequence.ts";
import type { SamplingParams } from "../../lib/core/sampling_params.ts";
import type { FinishReason } from "../../lib/core/outputs.ts";
import type { VirtualClock } from "../../lib/core/virtual_clock.ts";
import { BlockManager } from "../../lib/local/block_manager.ts";
import { Scheduler, type SchedulerConfig, type SchedulerOutput } from "../../lib/local/scheduler.ts";
import { chunkPairs } from "../../lib/local/step_budget.ts";
import { StopChecker } from "../../lib/local/stop_checker.ts";
import type { KvDataPath } from "../../lib/transfer/paths/kv_data_path.ts";
import { StepWaitEstimator } from "../../lib/transfer/worker/step_wait_estimator.ts";
import { TransferExecutor, type TransferPhaseMessage } from "../../lib/transfer/worker/transfer_executor.ts";
import type { TransferAckFields } from "../../lib/transfer/worker/local_plan.ts";
import { type StepWork, stepWorkOf, StepWorkTotals } from "../../lib/local/step_work.ts";
import type { SharedGpu } from "./shared_gpu.ts";
import type { EventTimers } from "./event_timers.ts";

/** Step time of a shape: device milliseconds and host milliseconds. */
export interface StepTimer {
  (work: StepWork): { deviceMs: number; hostMs: number };
}

/** Where a simulated worker's reports go (the control plane, after the message latency). */
export interface WorkerSink {
  delta(delta: BlockDelta, reflected: ReflectedRequests): void;
  snapshot(snapshot: BlockSnapshot, reflected: ReflectedRequests): void;
  stats(counters: Record<string, number>): void;
  /** One output token of `requestId` (the launcher timestamps it). */
  token(requestId: string): void;
  /** The request ended with `outputTokens` tokens, `cachedTokens` of its prompt from the cache. */
  finished(requestId: string, reason: FinishReason, cachedTokens: number, error?: string): void;
}

/** Options of a {@link SimulatedWorker}. */
export interface SimulatedWorkerOptions {
  rank: number;
  epoch: number;
  timers: EventTimers;
  gpu: SharedGpu;
  numBlocks: number;
  blockSize: number;
  kvBlockBytes: number;
  scheduler: SchedulerConfig;
  stepTime: StepTimer;
  /** Slowdown beyond the fair share while the GPU is shared, for decode-only and other steps. */
  sharedPenalty: { decode: number; other: number };
  sink: WorkerSink;
  /** The data path transfers use; absent: no transfer executor (transfers off). */
  dataPath?: KvDataPath;
  /** Direct partners and the path name they report (data_path_<name>_peer_<r> counters). */
  directPeers?: ReadonlyMap<number, string>;
  /** Push stats at least this often while busy (WorkerHost's default 500 ms). */
  statsIntervalMs?: number;
}

/** A worker on virtual time. */
export class SimulatedWorker {
  readonly rank: number;
  readonly blocks: BlockManager;
  readonly scheduler: Scheduler;
  readonly transfers: TransferExecutor | undefined;
  /** Steps run, and preemptions. */
  steps = 0;
  readonly #o: SimulatedWorkerOptions;
  readonly #clock: VirtualClock;
  readonly #timers: EventTimers;
  readonly #held = new Map<string, { seq: Sequence; stop: StopChecker }>();
  readonly #stepWait = new StepWaitEstimator();
  #queued: string[] = [];
  #allocated: string[] = [];
  readonly #awaitingBlocks = new Set<string>();
  #stepping = false;
  #kicked = false;
  readonly #stepTotals = new StepWorkTotals();
  /** Running, waiting and stepping at the last stats push (-1: none yet). */
  #lastStatsShape = [-1, -1, -1];
  #lastStats = -Infinity;
  #nextToken = 1;

  constructor(o: SimulatedWorkerOptions) {
    this.#o = o;
    this.rank = o.rank;
    this.#clock = o.timers.clock;
    this.#timers = o.timers;
    this.blocks = new BlockManager({
      numBlocks: o.numBlocks,
      blockSize: o.blockSize,
      rank: o.rank,
      epoch: o.epoch,
      now: () => o.timers.clock.wallNow(),
    });
    this.scheduler = new Scheduler(o.scheduler, this.blocks);
    if (o.dataPath) {
      this.transfers = new TransferExecutor({
        rank: o.rank,
        epoch: o.epoch,
        blocks: this.blocks,
        dataPath: o.dataPath,
        clock: o.timers.clock,
      });
      this.transfers.onChange = () => this.#afterTransferChange();
    }
  }

  /** Requests here (waiting or running). */
  get numRequests(): number {
    return this.#held.size;
  }

  /** Sends the first full snapshot (a worker's hello) and its stats. */
  start(): void {
    this.#o.sink.snapshot(this.blocks.snapshot(this.scheduler.load()), { queued: [], allocated: [] });
    this.#pushStats(true);
  }

  /** A dispatched request; an error finishes it at once (as a worker answers a bad dispatch). */
  dispatch(
    requestId: string,
    promptTokenIds: readonly number[],
    params: SamplingParams,
    promptBlockHashes?: readonly BlockHash[],
  ): void {
    let seq: Sequence;
    try {
      seq = new Sequence({
        requestId,
        promptTokenIds,
        params,
        blockSize: this.blocks.blockSize,
        ...(promptBlockHashes ? { promptBlockHashes } : {}),
        arrivalTime: this.#clock.wallNow(),
        seed: 0n,
      });
      this.scheduler.add(seq);
    } catch (e) {
      this.#o.sink.finished(requestId, "error", 0, `${(e as Error).name}: ${(e as Error).message}`);
      return;
    }
    const stop = new StopChecker(seq, {
      tokenizer: null,
      eosTokenIds: [],
      maxModelLen: this.scheduler.config.maxModelLen,
      incremental: false,
    });
    this.#held.set(requestId, { seq, stop });
    this.#queued.push(requestId);
    this.#awaitingBlocks.add(requestId);
    this.#kick();
  }

  /** A transfer phase from the control plane. */
  transferPhase(m: TransferPhaseMessage): Promise<TransferAckFields> {
    if (!this.transfers) {
      return Promise.resolve({
        planId: m.planId,
        phase: m.type.slice("transfer_".length) as "abort",
        rank: this.rank,
        ok: false,
        error: `simulated rank ${this.rank} has no data path`,
      });
    }
    return this.transfers.handle(m);
  }

  /** Live block tables (the invariant check's view). */
  liveBlockTables(): number[][] {
    return [...this.scheduler.running, ...this.scheduler.waiting].map((s) => s.blockTable);
  }

  /** Starts stepping at the end of this instant: dispatches of the same moment join the first step. */
  #kick(): void {
    if (this.#stepping || this.#kicked) return;
    this.#kicked = true;
    this.#timers.after(0, () => {
      this.#kicked = false;
      if (!this.#stepping) this.#step();
    });
  }

  #step(): void {
    if (!this.scheduler.hasUnfinished) return this.#idle();
    const out = this.scheduler.schedule();
    if (out.scheduled.length === 0) {
      // Blocks held by a transfer plan: its end frees them and kicks again.
      if (this.scheduler.numRunning === 0 && (this.transfers?.openPlans ?? 0) === 0) {
        throw new Error(
          `simulated rank ${this.rank}: the scheduler cannot admit ${
            this.scheduler.waiting[0]?.requestId
          } although nothing runs`,
        );
      }
      this.#report();
      return this.#idle();
    }
    if (!this.#stepping) {
      this.#stepping = true;
      this.#report();
    }
    const work = stepWorkOf(out);
    const t = this.#o.stepTime(work);
    const started = this.#clock.now();
    const penalty = work.prefillSeqs === 0 ? this.#o.sharedPenalty.decode : this.#o.sharedPenalty.other;
    this.#o.gpu.run(t.deviceMs, () => {
      // What the native call measures: the device time, stretched while another rank shares the GPU.
      const deviceMs = this.#clock.now() - started;
      this.#timers.after(t.hostMs, () => this.#complete(out, work, deviceMs, this.#clock.now() - started));
    }, penalty);
  }

  #complete(out: SchedulerOutput, work: StepWork, deviceMs: number, stepMs: number): void {
    this.steps++;
    const n = out.scheduled.filter((s) => s.sample).length;
    const tokens = new Int32Array(n);
    for (let i = 0; i < n; i++) tokens[i] = this.#nextToken = (this.#nextToken * 48271) % 2147483647 % 30000 + 1;
    const wall = this.#clock.wallNow();
    this.scheduler.completeStep(out, tokens, new Float32Array(n), wall);
    let row = 0;
    for (const s of out.scheduled) {
      if (!s.sample) continue;
      const token = tokens[row++]!;
      const h = this.#held.get(s.seq.requestId)!;
      this.#o.sink.token(s.seq.requestId);
      const verdict = h.stop.onToken(token);
      if (verdict.finish) this.#finish(h.seq, verdict.finish);
    }
    this.#stepTotals.add(work, deviceMs);
    if (work.prefillTokens > 0) {
      // As LocalEngine: only steps with prefill teach the step budget.
      this.scheduler.stepBudget?.observe({ tokens: out.numTokens, pairs: stepPairs(out) }, stepMs);
    }
    this.#stepWait.observe(stepMs);
    this.#report();
    this.#step();
  }

  #finish(seq: Sequence, reason: FinishReason): void {
    const cached = seq.numCachedTokens;
    this.scheduler.finish(seq, reason, this.#clock.wallNow());
    this.#held.delete(seq.requestId);
    this.#awaitingBlocks.delete(seq.requestId);
    this.#o.sink.finished(seq.requestId, reason, cached);
  }

  #idle(): void {
    this.#stepping = false;
    this.#report();
  }

  /** The block delta (if anything changed) with the request ids it reflects, then stats. */
  #report(): void {
    for (const id of this.#awaitingBlocks) {
      const h = this.#held.get(id);
      if (!h || h.seq.blockTable.length > 0) {
        this.#allocated.push(id);
        this.#awaitingBlocks.delete(id);
      }
    }
    const load = this.scheduler.load();
    const delta = this.blocks.takeDelta(load);
    if (delta) {
      const reflected: ReflectedRequests = {
        ...(this.#queued.length ? { queued: this.#queued } : {}),
        ...(this.#allocated.length ? { allocated: this.#allocated } : {}),
      };
      this.#queued = [];
      this.#allocated = [];
      this.#o.sink.delta(delta, reflected);
    }
    this.#pushStats(false, load);
  }

  #pushStats(force: boolean, load: RankLoad = this.scheduler.load()): void {
    const now = this.#clock.now();
    const last = this.#lastStatsShape;
    const stepping = this.#stepping ? 1 : 0;
    const same = load.numRunning === last[0] && load.numWaiting === last[1] && stepping === last[2];
    const idle = !this.scheduler.hasUnfinished && (this.transfers?.openPlans ?? 0) === 0;
    if (!force && same && now - this.#lastStats < (this.#o.statsIntervalMs ?? 500) && !idle) return;
    last[0] = load.numRunning;
    last[1] = load.numWaiting;
    last[2] = stepping;
    this.#lastStats = now;
    const counters: Record<string, number> = {
      kv_block_bytes: this.#o.kvBlockBytes,
      ...this.#stepTotals.counters(),
      // The device computes a step while the worker reads messages (as on CUDA): phases never wait.
      step_wait_ms: this.#stepWait.waitMs(false),
      step_token_budget: this.scheduler.stepTokenBudget,
      reads_during_steps: 1,
    };
    if (this.#o.directPeers) {
      counters.data_path_host = 0;
      for (const [peer, name] of this.#o.directPeers) counters[`data_path_${name}_peer_${peer}`] = 1;
    }
    this.#o.sink.stats(counters);
  }

  #afterTransferChange(): void {
    this.#report();
    if (this.scheduler.hasUnfinished) this.#kick();
  }
}

function stepPairs(out: SchedulerOutput): number {
  let pairs = 0;
  for (const s of out.scheduled) pairs += chunkPairs(s.start, s.numNewTokens);
  return pairs;
}
