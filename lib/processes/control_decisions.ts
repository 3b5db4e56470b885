/**
 * The control plane's decisions without its transport: routes (and the foreground transfers a route
 * may wait for), releases, dead ranks, worker reports and worker stats, applied to one Global
 * Scheduler and one Transfer Service in the order they are called. The control-plane process
 * (control_plane.ts) calls it from its socket handlers; the cluster simulator calls it directly on
 * virtual time. Both therefore route and transfer with the same code.
 * @module
 */
import type { BlockDelta, BlockSnapshot } from "../core/block_snapshot.ts";
import type { Clock } from "../core/clock.ts";
import type { ApplyResult } from "../global/global_block_manager.ts";
import { GlobalScheduler, type ReflectedRequests, type RouteDecision } from "../global/global_scheduler.ts";
import type { RoutingConfigInput } from "../global/routing_config.ts";
import type { RouteQuery } from "../global/routing_context.ts";
import type { NvlinkTopology } from "../global/topology.ts";
import {
  resolveTransferConfig,
  type TransferConfig,
  type TransferConfigInput,
} from "../transfer/control/transfer_config.ts";
import type { CoordinatorPhase } from "../transfer/control/transfer_coordinator.ts";
import type { TransferLink } from "../transfer/control/transfer_coordinator.ts";
import type { TransferPlan } from "../transfer/control/transfer_plan.ts";
import { TransferService } from "../transfer/control/transfer_service.ts";

/** Options of {@link ControlDecisions}. */
export interface ControlDecisionsOptions {
  routing?: RoutingConfigInput;
  topology?: NvlinkTopology;
  /** KV transfer mode and knobs, tuning constants included (default off). */
  transfers?: TransferConfigInput | Partial<TransferConfig>;
  /** How transfer phases reach a worker (and its ack comes back). */
  link: TransferLink;
  /** Prefix of transfer plan ids (unique per control-plane incarnation). */
  idPrefix: string;
  /** Time and timers of routing and transfers (default the real clock). */
  clock?: Clock;
  log?: (line: string) => void;
  /** Test hook run before each transfer phase (see TransferCoordinator). */
  beforeTransferPhase?: (plan: TransferPlan, phase: CoordinatorPhase) => void | Promise<void>;
  /** Where each completed plan's phase timings go. */
  trace?: (line: string) => void;
}

/** A route's answer: the decision, and when the request may go (undefined: at once). */
export interface RouteOutcome {
  decision: RouteDecision;
  /** Settles once the foreground transfers this request waits for ended (or their wait bound passed). */
  ready: Promise<void> | undefined;
}

/** Routing, page-table and transfer decisions of one control plane. */
export class ControlDecisions {
  readonly scheduler: GlobalScheduler;
  readonly transfers: TransferService;

  constructor(o: ControlDecisionsOptions) {
    this.scheduler = new GlobalScheduler({ config: o.routing, topology: o.topology, clock: o.clock });
    this.transfers = new TransferService({
      scheduler: this.scheduler,
      config: resolveTransferConfig(o.transfers ?? "off"),
      link: o.link,
      idPrefix: o.idPrefix,
      clock: o.clock,
      log: o.log,
      beforePhase: o.beforeTransferPhase,
      trace: o.trace,
    });
    this.transfers.start();
  }

  /** Routes one query; throws NoHealthyRankError, CapacityError, RangeError or TypeError. */
  route(query: RouteQuery): RouteOutcome {
    const { decision, ctx } = this.scheduler.routeWithContext(query);
    return { decision, ready: this.transfers.afterRoute(query, decision, ctx) };
  }

  /** The request ended (or was never dispatched). */
  release(requestId: string): void {
    this.scheduler.release(requestId);
    this.transfers.onRelease(requestId);
  }

  /** A worker died: its blocks, reservations, leases and path reports go (`epoch` unset: any epoch). */
  rankDown(rank: number, epoch?: number): void {
    this.scheduler.dropRank(rank, epoch);
    this.transfers.onRankDown(rank);
  }

  /** A worker's connection ended; it may come back with the same epoch and a full snapshot. */
  rankDisconnected(rank: number): void {
    this.scheduler.dropRank(rank, undefined, { retire: false });
  }

  /** A worker's full snapshot and the request ids it reflects. */
  applySnapshot(snapshot: BlockSnapshot, reflected: ReflectedRequests = {}): ApplyResult {
    return this.scheduler.applySnapshot(snapshot, reflected);
  }

  /** A worker's delta and the request ids it reflects. */
  applyDelta(delta: BlockDelta, reflected: ReflectedRequests = {}): ApplyResult {
    return this.scheduler.applyDelta(delta, reflected);
  }

  /** A worker's counters (KV bytes per block, prefill timings, step wait, data paths). */
  workerStats(rank: number, counters: Record<string, number>): void {
    this.scheduler.observeWorkerStats(rank, counters);
    this.transfers.observeWorkerStats(rank, counters);
  }

  /** Routing and transfer counters. */
  counters(): Record<string, number> {
    return { ...this.scheduler.counters(), ...this.transfers.counters() };
  }

  /** Stops background work (running plans finish or hit their deadlines). */
  stop(): void {
    this.transfers.stop();
  }
}
