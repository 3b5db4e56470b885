/**
 * The Global Scheduler: routes queries with the configured policy over the global page table,
 * reserves the chosen rank's blocks until its worker reports the request, and folds worker
 * snapshots/deltas (and the request ids they reflect) into that state. Pure state, no I/O: the
 * control-plane process drives it from its one event loop.
 * @module
 */
import type { BlockDelta, BlockSnapshot } from "../core/block_snapshot.ts";
import { type Clock, realClock } from "../core/clock.ts";
import { CapacityError } from "../core/errors.ts";
import { AdmittedPrefills } from "./admitted_prefills.ts";
import { type ApplyResult, GlobalBlockManager } from "./global_block_manager.ts";
import { DeviceSpeeds } from "./device_cost.ts";
import { PendingPrefixes } from "./pending_prefixes.ts";
import { createPolicy } from "./policies/policy_registry.ts";
import type { RoutingPolicy } from "./policies/routing_policy.ts";
import type { RouteAdvisor } from "./route_advisor.ts";
import { blocksNeeded, projectRouteCost } from "./route_cost.ts";
import { RouteReservations } from "./route_reservations.ts";
import { resolveRoutingConfig, type RoutingConfig, type RoutingConfigInput } from "./routing_config.ts";
import { type RouteQuery, RoutingContext } from "./routing_context.ts";
import type { NvlinkTopology } from "./topology.ts";

/** The outcome of one route. */
export interface RouteDecision {
  rank: number;
  reason: string;
  /** Leading prompt blocks already published on that rank. */
  matchedBlocks: number;
  /** False when the rank lacked room net of reservations (the request will wait there). */
  feasible: boolean;
  /** Blocks reserved on the rank for this request. */
  reservedBlocks: number;
}

/** Request ids a worker report reflects (see block_messages.ts). */
export interface ReflectedRequests {
  queued?: readonly string[];
  allocated?: readonly string[];
}

/** No rank can take requests (none healthy). */
export class NoHealthyRankError extends Error {
  override readonly name = "NoHealthyRankError";
  constructor(requestId: string) {
    super(`cannot route ${requestId}: no healthy worker rank`);
  }
}

/** Options of {@link GlobalScheduler}. */
export interface GlobalSchedulerOptions {
  config?: RoutingConfigInput;
  topology?: NvlinkTopology;
  /** Clock of reservation TTLs (default the real clock). */
  clock?: Clock;
}

/** Routing and page-table state of the control plane. */
export class GlobalScheduler {
  readonly config: RoutingConfig;
  readonly blocks = new GlobalBlockManager();
  readonly reservations = new RouteReservations();
  /** Prefills the ranks admitted and have not finished (routing waits behind them). */
  readonly prefills = new AdmittedPrefills();
  /** Routed prompts not yet prefilled: blocks each rank is about to hold (the lmpool cost reads them). */
  readonly pending = new PendingPrefixes();
  readonly policy: RoutingPolicy;
  readonly topology: NvlinkTopology | undefined;
  /** Each rank's measured step speed, from its workers' stats (the lmpool policy prices routes with it). */
  readonly speeds: DeviceSpeeds;
  /** Adjusts the policy's choice (placement leases); unset: the policy decides alone. */
  routeAdvisor: RouteAdvisor | undefined;
  readonly #clock: Clock;
  readonly #counters = new Map<string, number>();
  // Counted on every route, so kept apart from the keyed counters (no key to build or look up).
  readonly #perRoute = { routes: 0, matched_blocks: 0, query_blocks: 0, prefix_hits: 0 };
  readonly #reasons = new Map<string, number>();
  #lastExpiry = -Infinity;

  constructor(options: GlobalSchedulerOptions = {}) {
    this.config = resolveRoutingConfig(options.config);
    this.policy = createPolicy(this.config.policy, this.config);
    this.topology = options.topology;
    this.#clock = options.clock ?? realClock;
    this.speeds = new DeviceSpeeds(this.config.device);
  }

  /** Routes one query and reserves its blocks on the chosen rank. */
  route(query: RouteQuery): RouteDecision {
    return this.routeWithContext(query).decision;
  }

  /**
   * As {@link route}, also returning the routing context it decided in, so the caller's follow-up
   * work (TransferService.afterRoute) reuses its prefix matches instead of walking the chain again.
   */
  routeWithContext(query: RouteQuery): { decision: RouteDecision; ctx: RoutingContext } {
    checkQuery(query);
    const now = this.#clock.now();
    if (now - this.#lastExpiry >= this.config.reservationTtlMs / 10) {
      this.#lastExpiry = now;
      this.#count("reservations_expired", this.reservations.expire(now, this.config.reservationTtlMs));
      this.pending.expire(now, this.config.reservationTtlMs);
    }
    if (this.blocks.healthyRanks().length === 0) throw new NoHealthyRankError(query.requestId);
    const ctx = new RoutingContext(
      query,
      this.blocks,
      this.reservations,
      this.topology,
      this.config,
      this.speeds,
      this.prefills,
      this.pending,
    );
    const picked = this.policy.choose(ctx);
    const choice = this.routeAdvisor?.advise(ctx, picked) ?? picked;
    const cost = projectRouteCost(ctx, choice.rank);
    if (cost.neverFits && this.blocks.healthyRanks().every((r) => projectRouteCost(ctx, r).neverFits)) {
      const cap = ctx.capacity(choice.rank);
      throw new CapacityError(
        `request ${query.requestId} needs ${
          blocksNeeded(ctx, cap.blockSize)
        } blocks of ${cap.blockSize} tokens (${query.promptTokens} prompt tokens); the largest rank has ${
          Math.max(...this.blocks.healthyRanks().map((r) => ctx.capacity(r).numBlocks))
        }`,
      );
    }
    const matched = ctx.matchedBlocks(choice.rank);
    this.reservations.reserve(
      query.requestId,
      choice.rank,
      cost.newBlocks,
      query.promptTokens - ctx.expectedCachedTokens(choice.rank),
      now,
      query.blockHashes.at(-1),
    );
    this.pending.add(query.requestId, choice.rank, query.blockHashes, now);
    const c = this.#perRoute;
    c.routes++;
    c.matched_blocks += matched;
    c.query_blocks += query.blockHashes.length;
    if (matched > 0) c.prefix_hits++;
    this.#reasons.set(choice.reason, (this.#reasons.get(choice.reason) ?? 0) + 1);
    return {
      decision: {
        rank: choice.rank,
        reason: choice.reason,
        matchedBlocks: matched,
        feasible: cost.feasible,
        reservedBlocks: cost.newBlocks,
      },
      ctx,
    };
  }

  /** Applies a worker's full snapshot; on success folds in the request ids it reflects. */
  applySnapshot(snapshot: BlockSnapshot, reflected: ReflectedRequests = {}): ApplyResult {
    const r = this.blocks.applySnapshot(snapshot);
    this.#afterApply(r, snapshot.rank, reflected);
    return r;
  }

  /** Applies a worker's delta; on success folds in the request ids it reflects. */
  applyDelta(delta: BlockDelta, reflected: ReflectedRequests = {}): ApplyResult {
    const r = this.blocks.applyDelta(delta);
    this.#afterApply(r, delta.rank, reflected);
    return r;
  }

  /** A worker's stats counters: its cumulative prefill and decode step timings. */
  observeWorkerStats(rank: number, counters: Record<string, number>): void {
    this.speeds.observe(rank, counters);
  }

  /** The request ended (or was never dispatched): drop its reservation. Idempotent. */
  release(requestId: string): boolean {
    this.prefills.end(requestId);
    this.pending.end(requestId);
    return this.reservations.release(requestId);
  }

  /**
   * A worker died (or disconnected): its blocks, reservations and sticky sessions go. Returns its
   * reserved request ids. `retire: false` lets the same epoch report again (see GlobalBlockManager).
   */
  dropRank(rank: number, epoch?: number, options: { retire?: boolean } = {}): string[] {
    const dropped = this.blocks.dropRank(rank, epoch, options);
    if (!dropped) return [];
    this.policy.forgetRank?.(rank);
    this.speeds.forget(rank);
    this.#count("ranks_dropped", 1);
    this.prefills.dropRank(rank);
    this.pending.dropRank(rank);
    return this.reservations.dropRank(rank);
  }

  /** Routing counters (routes, reasons, hits, rejected snapshots...). */
  counters(): Record<string, number> {
    return {
      ...Object.fromEntries(Object.entries(this.#perRoute).filter(([, n]) => n !== 0)),
      ...Object.fromEntries([...this.#reasons].map(([reason, n]) => [`reason_${reason}`, n])),
      ...Object.fromEntries(this.#counters),
      reservations: this.reservations.size,
      healthy_ranks: this.blocks.healthyRanks().length,
      cached_blocks: this.blocks.totalEntries(),
    };
  }

  #afterApply(r: ApplyResult, rank: number, reflected: ReflectedRequests): void {
    if (!r.applied) {
      this.#count(`rejected_${r.reason}`, 1);
      return;
    }
    if (reflected.queued) this.reservations.markQueued(rank, reflected.queued);
    if (reflected.allocated) {
      for (const id of reflected.allocated) {
        const r = this.reservations.get(id);
        if (r?.rank === rank && r.lastHash !== undefined) this.prefills.admit(id, rank, r.tokens, r.lastHash);
      }
      this.reservations.markQueued(rank, reflected.allocated);
      this.reservations.markAllocated(rank, reflected.allocated);
    }
    const table = this.blocks.table(rank);
    if (table) {
      this.prefills.settle(rank, (h) => table.entries.has(h));
      this.pending.settle(rank, (h) => table.entries.has(h));
    }
  }

  #count(key: string, n: number): void {
    if (n !== 0) this.#counters.set(key, (this.#counters.get(key) ?? 0) + n);
  }
}

function checkQuery(q: RouteQuery): void {
  if (typeof q.requestId !== "string" || q.requestId === "") {
    throw new TypeError(`route query needs a requestId string, got ${JSON.stringify(q.requestId)}`);
  }
  if (!Number.isInteger(q.promptTokens) || q.promptTokens < 0) {
    throw new RangeError(`route query ${q.requestId}: promptTokens must be an integer >= 0, got ${q.promptTokens}`);
  }
  if (!Number.isInteger(q.maxTokens) || q.maxTokens < 0) {
    throw new RangeError(`route query ${q.requestId}: maxTokens must be an integer >= 0, got ${q.maxTokens}`);
  }
  if (q.ingressRank !== undefined && (!Number.isInteger(q.ingressRank) || q.ingressRank < 0)) {
    throw new RangeError(`route query ${q.requestId}: ingressRank must be a rank, got ${q.ingressRank}`);
  }
}
