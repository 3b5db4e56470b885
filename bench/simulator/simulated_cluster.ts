/**
 * A simulated LMPool cluster on virtual time: the real control-plane decisions (ControlDecisions:
 * Global Scheduler, Global Block Manager, the routing policy, the transfer planner, cost gate and
 * coordinator) over simulated workers (simulated_worker.ts) on simulated GPUs (shared_gpu.ts), with
 * the launcher's part done here as LLMEngine does it: hash the prompt's blocks, ask for a route,
 * wait for the route's foreground transfer if it has one, dispatch, stream tokens back, release the
 * route when the request ends. Every message between processes takes `messageMs` of virtual time.
 * @module
 */
import { prefixBlockHashes } from "../../lib/core/block_hash.ts";
import type { EngineStats, RankStats } from "../../lib/core/engine_api.ts";
import type { FinishReason } from "../../lib/core/outputs.ts";
import type { SamplingParams } from "../../lib/core/sampling_params.ts";
import type { VirtualClock } from "../../lib/core/virtual_clock.ts";
import type { RoutingConfigInput } from "../../lib/global/routing_config.ts";
import type { NvlinkTopology } from "../../lib/global/topology.ts";
import type { SchedulerConfig } from "../../lib/local/scheduler.ts";
import { ControlDecisions } from "../../lib/processes/control_decisions.ts";
import type { TransferConfigInput } from "../../lib/transfer/control/transfer_config.ts";
import type { TransferAck } from "../../lib/transfer/control/transfer_coordinator.ts";
import { EventTimers } from "./event_timers.ts";
import { SharedGpu } from "./shared_gpu.ts";
import { type PayloadCost, SimulatedFabric } from "./simulated_data_path.ts";
import { SimulatedWorker, type StepTimer } from "./simulated_worker.ts";

/** Options of a {@link SimulatedCluster}. */
export interface SimulatedClusterOptions {
  clock: VirtualClock;
  /** Ranks, and the GPU each runs on (ranks of one GPU share its compute). */
  rankGpus: readonly number[];
  topology: NvlinkTopology;
  routing: RoutingConfigInput;
  transfers: TransferConfigInput;
  numBlocks: number;
  blockSize: number;
  kvBlockBytes: number;
  scheduler: SchedulerConfig;
  stepTime: (rank: number) => StepTimer;
  payloadCost: PayloadCost;
  /** One-way latency of a message between two processes, ms. */
  messageMs: number;
  /** Extra slowdown of decode-only and of other steps while ranks share a GPU (shared_gpu.ts; 1: ideal). */
  sharedGpuPenalty?: { decode: number; other: number };
}

/** What the launcher hears about one request. */
export interface RequestHooks {
  /** The request went to `rank`. */
  routed?(rank: number): void;
  /** An output token, as the launcher reads it at virtual time `atMs`. */
  token(atMs: number): void;
  finished(reason: FinishReason, cachedTokens: number, rank: number, error?: string): void;
}

/** One request as the launcher submits it. */
export interface SimulatedRequest {
  requestId: string;
  promptTokenIds: readonly number[];
  params: SamplingParams;
  sessionId?: string;
}

/** The cluster. */
export class SimulatedCluster {
  readonly decisions: ControlDecisions;
  readonly workers: SimulatedWorker[];
  readonly gpus: SharedGpu[];
  readonly fabric: SimulatedFabric;
  /** The simulator's own event timers (the event pump asks them whether an event needs a settle). */
  readonly timers: EventTimers;
  readonly #o: SimulatedClusterOptions;
  readonly #clock: VirtualClock;
  readonly #inflight = new Map<string, { hooks: RequestHooks; rank: number }>();
  readonly #finishedByRank: number[];
  readonly #generatedByRank: number[];

  constructor(o: SimulatedClusterOptions) {
    this.#o = o;
    this.#clock = o.clock;
    this.timers = new EventTimers(o.clock);
    const numGpus = Math.max(...o.rankGpus) + 1;
    this.gpus = Array.from({ length: numGpus }, (_, g) => new SharedGpu(g, this.timers));
    this.fabric = new SimulatedFabric(o.clock, o.payloadCost, o.kvBlockBytes);
    this.decisions = new ControlDecisions({
      routing: o.routing,
      topology: o.topology,
      transfers: o.transfers,
      link: (rank, m) => this.#phase(rank, m),
      idPrefix: "sim",
      clock: o.clock,
      log: () => {},
    });
    const transfersOn = this.decisions.transfers.enabled;
    this.#finishedByRank = o.rankGpus.map(() => 0);
    this.#generatedByRank = o.rankGpus.map(() => 0);
    this.workers = o.rankGpus.map((gpu, rank) => {
      const peers = new Map<number, string>();
      for (const p of o.topology.partners(rank)) peers.set(p, o.payloadCost.pathName(rank, p));
      return new SimulatedWorker({
        rank,
        epoch: 1,
        timers: this.timers,
        gpu: this.gpus[gpu]!,
        numBlocks: o.numBlocks,
        blockSize: o.blockSize,
        kvBlockBytes: o.kvBlockBytes,
        scheduler: o.scheduler,
        stepTime: o.stepTime(rank),
        sharedPenalty: o.sharedGpuPenalty ?? { decode: 1, other: 1 },
        ...(transfersOn ? { dataPath: this.fabric.pathOf(rank), directPeers: peers } : {}),
        sink: {
          delta: (d, reflected) => this.#toControl(() => this.decisions.applyDelta(d, reflected)),
          snapshot: (s, reflected) => this.#toControl(() => this.decisions.applySnapshot(s, reflected)),
          stats: (c) => this.#toControl(() => this.decisions.workerStats(rank, c)),
          token: (id) => {
            this.#generatedByRank[rank]!++;
            // The launcher reads the token one message later; stamping it now saves an event per token.
            this.#inflight.get(id)?.hooks.token(this.#clock.now() + o.messageMs);
          },
          finished: (id, reason, cached, error) => this.#workerFinished(rank, id, reason, cached, error),
        },
      });
    });
    for (const w of this.workers) w.start();
  }

  /** Submits a request now (the launcher's side). */
  submit(r: SimulatedRequest, hooks: RequestHooks): void {
    this.#inflight.set(r.requestId, { hooks, rank: -1 });
    const query = {
      requestId: r.requestId,
      blockHashes: prefixBlockHashes(r.promptTokenIds, this.#o.blockSize),
      promptTokens: r.promptTokenIds.length,
      maxTokens: r.params.maxTokens,
      ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
    };
    this.#toControl(() => {
      let outcome;
      try {
        outcome = this.decisions.route(query);
      } catch (e) {
        const err = e as Error;
        return this.#later(() => this.#end(r.requestId, "error", 0, -1, `${err.name}: ${err.message}`));
      }
      const rank = outcome.decision.rank;
      const reply = () =>
        this.#later(() => {
          const f = this.#inflight.get(r.requestId);
          if (!f) return;
          f.rank = rank;
          f.hooks.routed?.(rank);
          this.#later(() => this.workers[rank]!.dispatch(r.requestId, r.promptTokenIds, r.params, query.blockHashes));
        });
      if (outcome.ready) {
        this.timers.promised();
        void outcome.ready.then(reply);
      } else reply();
    });
  }

  /** Engine stats as LLMEngine reports them (ranks, routing counters, transfers). */
  stats(): EngineStats {
    const routing = this.decisions.counters();
    const ranks: RankStats[] = this.workers.map((w, r) => ({
      rank: r,
      numRunning: w.scheduler.numRunning,
      numWaiting: w.scheduler.numWaiting,
      numBlocks: w.blocks.numBlocks,
      blockSize: w.blocks.blockSize,
      numFreeBlocks: w.blocks.numFreeBlocks,
      numReclaimableBlocks: w.blocks.numReclaimableBlocks,
      kvUsage: w.blocks.numLiveBlocks / w.blocks.numBlocks,
      prefixQueryTokens: w.blocks.prefixQueryTokens,
      prefixHitTokens: w.blocks.prefixHitTokens,
      numFinished: this.#finishedByRank[r]!,
      numGeneratedTokens: this.#generatedByRank[r]!,
    }));
    return {
      ranks,
      routing,
      transfers: {
        count: routing.transfer_completed ?? 0,
        blocks: routing.transfer_blocks ?? 0,
        bytes: routing.transfer_bytes ?? 0,
      },
      health: { ranks: this.workers.map((_, r) => ({ rank: r, up: true, restarts: 0 })) },
    };
  }

  /**
   * Conservation at the end of a run: no request in flight, every worker's blocks free or
   * reclaimable and its invariants holding, and the control plane's page table equal to what the
   * workers publish. Returns the violations (empty when all hold).
   */
  audit(): string[] {
    const out: string[] = [];
    if (this.#inflight.size > 0) out.push(`${this.#inflight.size} requests still in flight`);
    for (const w of this.workers) {
      const b = w.blocks;
      if (w.numRequests > 0) out.push(`rank ${w.rank}: ${w.numRequests} requests still held`);
      if ((w.transfers?.openPlans ?? 0) > 0) out.push(`rank ${w.rank}: ${w.transfers!.openPlans} transfer plans open`);
      if (b.numFreeBlocks + b.numReclaimableBlocks !== b.numBlocks) {
        out.push(
          `rank ${w.rank}: free ${b.numFreeBlocks} + reclaimable ${b.numReclaimableBlocks} != ${b.numBlocks} blocks`,
        );
      }
      try {
        b.checkInvariants({ drained: true, liveBlockTables: w.liveBlockTables() });
      } catch (e) {
        out.push(`rank ${w.rank}: ${(e as Error).message}`);
      }
      const published = new Map(b.snapshot(w.scheduler.load()).entries.map((e) => [e.hash, e.block]));
      const table = this.decisions.scheduler.blocks.toSnapshots().find((s) => s.rank === w.rank);
      const seen = new Map((table?.entries ?? []).map((e) => [e.hash, e.block]));
      if (published.size !== seen.size || [...published].some(([h, blk]) => seen.get(h) !== blk)) {
        out.push(`rank ${w.rank}: page table has ${seen.size} blocks, the worker publishes ${published.size}`);
      }
    }
    return out;
  }

  #phase(rank: number, m: Parameters<SimulatedWorker["transferPhase"]>[0]): Promise<TransferAck> {
    return new Promise((resolve) => {
      this.#later(() => {
        this.timers.promised();
        void this.workers[rank]!.transferPhase(m).then((ack) =>
          this.#later(() => {
            this.timers.promised();
            resolve(ack as TransferAck);
          })
        );
      });
    });
  }

  #workerFinished(rank: number, id: string, reason: FinishReason, cached: number, error?: string): void {
    this.#finishedByRank[rank]!++;
    this.#later(() => this.#end(id, reason, cached, rank, error));
  }

  #end(id: string, reason: FinishReason, cached: number, rank: number, error?: string): void {
    const f = this.#inflight.get(id);
    if (!f) return;
    this.#inflight.delete(id);
    this.#toControl(() => this.decisions.release(id));
    this.timers.promised();
    f.hooks.finished(reason, cached, rank, error);
  }

  #toControl(fn: () => void): void {
    this.#later(fn);
  }

  #later(fn: () => void): void {
    this.timers.after(this.#o.messageMs, fn);
  }
}
