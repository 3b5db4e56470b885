/**
 * The lmpool routing cost of one candidate rank, in token-equivalents: queue work + missing
 * prefill + reclaim pressure, with capacity feasibility net of route reservations. Prefix
 * locality enters only by shrinking missing prefill, never as a separate hit-rate objective.
 * @module
 */
import type { RoutingContext } from "./routing_context.ts";

/** The projected cost of placing the query on one rank. */
export interface RouteCost {
  rank: number;
  /** Token-equivalent work already queued or running there (including routed-but-unreported). */
  queueWork: number;
  /** Prompt tokens the rank would prefill (weighted). */
  missingPrefill: number;
  /** Tokens of cached blocks it would have to evict (weighted). */
  reclaimPressure: number;
  total: number;
  /** Blocks the request needs beyond its matched prefix. */
  newBlocks: number;
  /** Free + safely reclaimable blocks left after reservations, minus newBlocks (negative: short). */
  headroom: number;
  /** The request fits now (headroom >= 0). */
  feasible: boolean;
  /** The request can never fit this rank (more blocks than the rank has). */
  neverFits: boolean;
}

/** Blocks a query occupies at admission: its prompt plus a decode reserve. */
export function blocksNeeded(ctx: RoutingContext, blockSize: number): number {
  return Math.ceil(ctx.query.promptTokens / blockSize) + ctx.config.cost.decodeReserveBlocks;
}

/** A RouteCost to overwrite (a policy that prices every rank on every route reuses two). */
export function emptyRouteCost(): RouteCost {
  return {
    rank: 0,
    queueWork: 0,
    missingPrefill: 0,
    reclaimPressure: 0,
    total: 0,
    newBlocks: 0,
    headroom: 0,
    feasible: false,
    neverFits: false,
  };
}

/** Projects the cost of routing `ctx.query` to `rank`, into `out` when given. */
export function projectRouteCost(ctx: RoutingContext, rank: number, out: RouteCost = emptyRouteCost()): RouteCost {
  const w = ctx.config.cost;
  const load = ctx.load(rank);
  const cap = ctx.capacity(rank);
  const matched = ctx.matchedBlocks(rank);
  const res = ctx.reservations;
  const queueWork = w.waitingTokenWeight * (load.waitingTokens + res.pendingTokens(rank)) +
    w.runningTokenWeight * load.runningTokens +
    w.perSequenceTokens * (load.numRunning + load.numWaiting + res.pendingRequests(rank));
  const missingPrefill = w.missingPrefillWeight * (ctx.query.promptTokens - ctx.cachedTokens(rank));
  const total = blocksNeeded(ctx, cap.blockSize);
  const newBlocks = Math.max(0, total - matched);
  const free = Math.max(0, cap.numFree - res.reservedBlocks(rank));
  // Matched reclaimable blocks will be reused, and plan-locked ones cannot be evicted.
  const reclaimable = Math.max(
    0,
    cap.numReclaimable - ctx.matchedReclaimable(rank) - ctx.blocks.inFlightReclaimable(rank),
  );
  const evict = Math.max(0, newBlocks - free);
  const reclaimPressure = w.reclaimTokenWeight * Math.min(evict, reclaimable) * cap.blockSize;
  const headroom = free + reclaimable - newBlocks;
  out.rank = rank;
  out.queueWork = queueWork;
  out.missingPrefill = missingPrefill;
  out.reclaimPressure = reclaimPressure;
  out.total = queueWork + missingPrefill + reclaimPressure;
  out.newBlocks = newBlocks;
  out.headroom = headroom;
  out.feasible = headroom >= 0;
  out.neverFits = total > cap.numBlocks;
  return out;
}
