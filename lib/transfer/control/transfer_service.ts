/**
 * The control plane's transfer policy loop: after each route it records hotness and, when the
 * chosen rank has a real shortage, starts foreground plans and holds the route's reply until the
 * prefix copy it needs ends (briefly: never longer than the prefill it saves), so the request
 * arrives to find the blocks; a timer runs
 * background placement passes and grants placement leases for published copies. Plans run on the
 * {@link TransferCoordinator}; routing honours leases through GlobalScheduler.routeAdvisor.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import { type Clock, realClock, settlesWithin, type TimerHandle } from "../../core/clock.ts";
import type { GlobalScheduler, RouteDecision } from "../../global/global_scheduler.ts";
import { HotnessTracker, type PlacementEnv, planPlacements } from "./placement.ts";
import { PlacementLeases } from "./placement_leases.ts";
import { projectRouteCost } from "../../global/route_cost.ts";
import { type RouteQuery, RoutingContext } from "../../global/routing_context.ts";
import type { TransferConfig } from "./transfer_config.ts";
import { TransferCostModel } from "./transfer_cost_model.ts";
import { ONE_SIDED_PATHS } from "./pair_data_paths.ts";
import { type CoordinatorPhase, TransferCoordinator, type TransferLink } from "./transfer_coordinator.ts";
import type { TransferPlan } from "./transfer_plan.ts";
import {
  netFreeBlocks,
  type PlannerEnv,
  planOffload,
  planPrefixCopy,
  queuedPrefillTokens,
} from "./transfer_planner.ts";

/** Options of a {@link TransferService}. */
export interface TransferServiceOptions {
  scheduler: GlobalScheduler;
  config: TransferConfig;
  link: TransferLink;
  /** Prefix of plan ids (unique per control-plane incarnation). */
  idPrefix: string;
  /** Time and timers of the service, its coordinator and its leases (default the real clock). */
  clock?: Clock;
  log?: (line: string) => void;
  /** Test hook of the coordinator (see TransferCoordinator). */
  beforePhase?: (plan: TransferPlan, phase: CoordinatorPhase) => void | Promise<void>;
  /** Where each completed plan's phase timings go (see TransferCoordinatorOptions.trace). */
  trace?: (line: string) => void;
}

const PLACEMENT_QUERY: RouteQuery = { requestId: "(placement)", blockHashes: [], promptTokens: 0, maxTokens: 0 };

/** Foreground and background transfer decisions of one control plane. */
export class TransferService {
  readonly config: TransferConfig;
  readonly cost: TransferCostModel;
  readonly coordinator: TransferCoordinator;
  readonly hotness: HotnessTracker;
  readonly leases: PlacementLeases;
  readonly #scheduler: GlobalScheduler;
  readonly #clock: Clock;
  readonly #log: (line: string) => void;
  readonly #blockBytes = new Map<number, number>();
  readonly #placedAt = new Map<string, number>();
  #timer: TimerHandle | undefined;

  constructor(o: TransferServiceOptions) {
    this.config = o.config;
    this.#scheduler = o.scheduler;
    this.#clock = o.clock ?? realClock;
    this.#log = o.log ?? ((l) => console.error(l));
    this.cost = new TransferCostModel(o.config);
    this.coordinator = new TransferCoordinator({
      blocks: o.scheduler.blocks,
      link: o.link,
      cost: this.cost,
      idPrefix: o.idPrefix,
      clock: this.#clock,
      log: o.log,
      beforePhase: o.beforePhase,
      trace: o.trace,
      pipelinePhases: (src, dst) => this.#pipelines(src, dst),
    });
    this.hotness = new HotnessTracker(o.config);
    this.leases = new PlacementLeases({
      bonusTokens: o.config.leaseRouteBonusTokens,
      minLoadSkewTokens: o.config.minLoadSkewTokens,
      minLoadSkewRatio: o.config.minLoadSkewRatio,
      clock: this.#clock,
    });
    if (o.config.mode !== "off") o.scheduler.routeAdvisor = this.leases;
  }

  /** True when plans may be made at all (a mode other than off, and some direct pair: NVLink or one device). */
  get enabled(): boolean {
    return this.config.mode !== "off" && (this.#scheduler.topology?.pairs.length ?? 0) > 0;
  }

  /** Starts periodic placement passes. */
  start(): void {
    if (!this.enabled || !this.config.background || this.#timer) return;
    this.#timer = this.#clock.setInterval(() => this.placementPass(), this.config.placementIntervalMs, {
      keepsAlive: false,
    });
  }

  /** Stops the placement timer (running plans finish or hit their deadlines). */
  stop(): void {
    this.#clock.clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Pipelined phases are safe on the host path and one-sided (CUDA IPC) paths, not NCCL (see the coordinator). */
  #pipelines(src: number, dst: number): boolean {
    const p = this.cost.paths.pathOf(src, dst);
    return p.kind === "host" || (p.kind === "direct" && ONE_SIDED_PATHS.has(p.name));
  }

  /** Folds in a worker's counters: KV bytes per block, its data paths, cumulative prefill timings, its step wait. */
  observeWorkerStats(rank: number, counters: Record<string, number>): void {
    this.cost.paths.observe(rank, counters);
    const bytes = counters.kv_block_bytes;
    if (bytes && this.#blockBytes.get(rank) !== bytes) {
      this.#blockBytes.set(rank, bytes);
      if (!this.cost.profileMatches(bytes)) {
        this.#log(
          `[transfer] the latency profile was measured with ${
            this.cost.profile!.blockBytes
          } bytes per block, rank ${rank} has ${bytes}: estimates interpolate on payload bytes`,
        );
      }
    }
    if (counters.prefill_tokens !== undefined && counters.prefill_ms !== undefined) {
      this.cost.observePrefillTimings(rank, counters.prefill_tokens, counters.prefill_ms);
    }
    if (counters.step_wait_ms !== undefined) this.cost.observeStepWait(rank, counters.step_wait_ms);
    if (counters.step_token_budget !== undefined) this.cost.observeStepBudget(rank, counters.step_token_budget);
    if (counters.reads_during_steps !== undefined) {
      this.cost.observeReadsDuringSteps(rank, counters.reads_during_steps === 1);
    }
  }

  /**
   * Called after each route: records hotness, starts foreground plans for a shortage on the chosen
   * rank, and returns a promise that settles when the request may go (undefined: reply at once).
   * The request waits only for plans that bring its own prefix (its prefix copy, or a running plan
   * already bringing those blocks), only for plans expected to end within the wait, and at most
   * foregroundWaitMs and, in auto mode, the prefill those blocks save: a late plan then finishes
   * without it. An offload holds the reply only until its source pinned the chains it moves (at
   * most foregroundWaitMs); the worker admits the request once the move frees them. `ctx` is the
   * context the route decided in (GlobalScheduler.routeWithContext), when the caller has it.
   */
  afterRoute(query: RouteQuery, decision: RouteDecision, ctx?: RoutingContext): Promise<void> | undefined {
    if (!this.enabled) return undefined;
    const s = this.#scheduler;
    ctx ??= new RoutingContext(query, s.blocks, s.reservations, s.topology, s.config);
    let resident = 0;
    for (const r of s.blocks.healthyRanks()) resident = Math.max(resident, ctx.match(r).blocks);
    this.hotness.observe(query.requestId, query.blockHashes, resident, decision.matchedBlocks > 0, this.#clock.now());
    if (!this.config.foreground) return undefined;
    const env = this.#plannerEnv(ctx);
    const c = this.coordinator;
    // Running plans bringing this prefix here: join them rather than copy twice.
    const joined = c.inboundPlans(decision.rank, query.blockHashes);
    const copy = planPrefixCopy(env, decision.rank, decision.feasible);
    const offload = planOffload(env, decision.rank);
    for (const v of [copy, offload]) if (!v.ok && v.reason !== "no_shortage") c.count(`transfer_skip_${v.reason}`);
    // An offload saves cold chains from the eviction this request would cause: the request must
    // not reach the rank before the source pinned them, but needs nothing more from the move.
    const pinned = offload.ok
      ? c.prepared(c.start(offload.plan, this.config.foregroundDeadlineMs).plan.planId)
      : undefined;
    const waits: Promise<unknown>[] = [];
    let savedMs = 0;
    if (copy.ok) {
      waits.push(c.start(copy.plan, this.config.foregroundDeadlineMs).done);
      savedMs += copy.plan.savedMs;
    }
    const now = this.#clock.now();
    const bs = ctx.capacity(decision.rank).blockSize;
    for (const j of joined) {
      const saves = this.cost.savedPrefillMs(decision.rank, j.blocks * bs);
      // A plan its own estimate says ends after the prefill it would save is not worth waiting for.
      if (this.config.mode === "auto" && j.startedAt + j.plan.estimatedMs - now > saves) continue;
      waits.push(j.done);
      savedMs += saves;
    }
    if (waits.length === 0 && !pinned) return undefined;
    const boundMs = this.config.mode === "force"
      ? this.config.foregroundWaitMs
      : Math.min(this.config.foregroundWaitMs, savedMs);
    return Promise.all([this.#bounded(waits, boundMs), pinned && this.#bounded([pinned], this.config.foregroundWaitMs)])
      .then(() => undefined);
  }

  /** Settles when every one of `waits` settled, or after `ms` (counted as an expired wait). */
  #bounded(waits: readonly Promise<unknown>[], ms: number): Promise<void> | undefined {
    if (waits.length === 0) return undefined;
    return settlesWithin(Promise.allSettled(waits), ms, this.#clock).then((settled) => {
      if (!settled) this.coordinator.count("transfer_route_wait_expired");
    });
  }

  /** A routed request ended: its ingress demand no longer counts. */
  onRelease(requestId: string): void {
    this.hotness.release(requestId);
  }

  /** A rank died: its leases, data-path report and step wait go. */
  onRankDown(rank: number): void {
    this.leases.dropRank(rank);
    this.cost.paths.forget(rank);
    this.cost.forgetRank(rank);
  }

  /** One background placement pass; returns the plans started. */
  placementPass(): TransferPlan[] {
    if (!this.enabled || !this.config.background) return [];
    const now = this.#clock.now();
    const hot = this.hotness.hot(now);
    if (hot.length === 0) return [];
    const s = this.#scheduler;
    const ctx = new RoutingContext(PLACEMENT_QUERY, s.blocks, s.reservations, s.topology, s.config);
    const c = this.coordinator;
    const env: PlacementEnv = {
      blocks: s.blocks,
      topology: s.topology!,
      config: this.config,
      cost: this.cost,
      blockBytes: (r) => this.#blockBytes.get(r) ?? 0,
      blockSize: (r) => ctx.capacity(r).blockSize,
      queueWork: (r) => projectRouteCost(ctx, r).queueWork,
      netFree: (r) => netFreeBlocks(ctx, r) - c.inboundBlocks(r),
      inbound: (r, h) => c.isInbound(r, h),
      movingOut: (r, h) => c.isMovingOut(r, h),
      pairBusy: (a, b) => c.pairBusy(a, b),
      coolingDown: (h, r) => now - (this.#placedAt.get(`${h}@${r}`) ?? -Infinity) < this.config.cooldownMs,
    };
    const started: TransferPlan[] = [];
    for (const cand of planPlacements(env, hot)) {
      const { plan, done } = c.start(cand.plan, this.config.backgroundDeadlineMs);
      started.push(plan);
      for (const l of cand.leases) this.#placedAt.set(`${l.hash}@${plan.dst}`, now);
      void done.then((o) => {
        if (o.status === "completed") {
          for (const l of cand.leases) this.leases.grant(l.hash, l.depth, plan.dst, this.config.leaseMs);
        }
      });
    }
    if (this.#placedAt.size > 8 * this.config.maxTrackedChains) {
      for (const [k, t] of this.#placedAt) if (now - t >= this.config.cooldownMs) this.#placedAt.delete(k);
    }
    return started;
  }

  /** transfer_* and lease counters. */
  counters(): Record<string, number> {
    return {
      ...this.coordinator.counters(),
      transfer_active: this.coordinator.activePlans,
      lease_routes: this.leases.routed,
      lease_hits: this.leases.hits,
      leases: this.leases.size,
      hot_chains: this.hotness.size,
    };
  }

  #plannerEnv(ctx: RoutingContext): PlannerEnv {
    const c = this.coordinator;
    return {
      ctx,
      config: this.config,
      cost: this.cost,
      blockBytes: (r) => this.#blockBytes.get(r) ?? 0,
      inbound: (r: number, h: BlockHash) => c.isInbound(r, h),
      movingOut: (r: number, h: BlockHash) => c.isMovingOut(r, h),
      inboundBlocks: (r: number) => c.inboundBlocks(r),
      queuedPrefillTokens: (r: number) => queuedPrefillTokens(ctx, r),
    };
  }
}
