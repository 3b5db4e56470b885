/**
 * Foreground transfer planning: when a routed request meets a real local block shortage on its
 * rank, ask a direct partner (NVLink or same device) for exactly that shortage, never the whole
 * sequence.
 * - prefix copy: a partner holds more of the request's prompt prefix than the rank does; copy the
 *   missing blocks (only those) so the request prefills less.
 * - offload: the rank's pending work needs more blocks than are free, so cold cached chains would
 *   be reclaimed (lost); move the coldest whole unreferenced chain suffixes (LFU, then LRU) to a
 *   partner with room instead, releasing them here. The partner's room is its free blocks net of
 *   route reservations, of blocks running plans bring it, and of the room it keeps for its own next
 *   prompts (a moved chain arrives cold, so that room would evict it first); with
 *   offloadIntoColderCache also, unless it is short of free blocks itself, the cached blocks its
 *   own reclamation would free before any block at least as hot as the chain moved (see
 *   {@link ReclaimForecast}): a move never evicts more valuable cache than it saves, nor cache its
 *   own requests are about to take.
 *   A prefix copy needs no such rule: its blocks replace blocks the request would allocate anyway.
 * Each candidate must pass source validity (published, not being moved away, not already
 * arriving), target capacity, the minimum batch size and the cost ratio (force skips only the ratio).
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import type { BlockEntry } from "../../core/block_snapshot.ts";
import { ReclaimForecast } from "./reclaim_forecast.ts";
import type { RoutingContext } from "../../global/routing_context.ts";
import type { TransferConfig } from "./transfer_config.ts";
import type { TransferCostModel } from "./transfer_cost_model.ts";
import { type PlannedBlock, type PlanVerdict, skip } from "./transfer_plan.ts";

/** What the foreground planners read besides the routing context. */
export interface PlannerEnv {
  ctx: RoutingContext;
  config: TransferConfig;
  cost: TransferCostModel;
  /** KV bytes per block of a rank (0 while unknown). */
  blockBytes: (rank: number) => number;
  /** A running plan already brings `hash` to `rank`. */
  inbound: (rank: number, hash: BlockHash) => boolean;
  /** A running move plan takes `hash` away from `rank`. */
  movingOut: (rank: number, hash: BlockHash) => boolean;
  /** Blocks running plans bring to a rank (they take its free blocks when they land). */
  inboundBlocks: (rank: number) => number;
  /** Prefill tokens queued on a rank (besides the routed request's), for the phase-wait estimate. */
  queuedPrefillTokens?: (rank: number) => number;
}

/** Healthy direct partners of `rank`. */
function partnersOf(env: PlannerEnv, rank: number): number[] {
  return (env.ctx.topology?.partners(rank) ?? []).filter((p) => env.ctx.blocks.isHealthy(p));
}

/** Free blocks of a rank net of route reservations. */
export function netFreeBlocks(ctx: RoutingContext, rank: number): number {
  return ctx.capacity(rank).numFree - ctx.reservations.reservedBlocks(rank);
}

/**
 * Free blocks of a rank a chain moved there unasked can stay in: net of route reservations, of the
 * blocks running plans bring there, and of the room it keeps for its own next prompts
 * (targetReserveShare of its blocks).
 */
function roomFor(env: PlannerEnv, rank: number): number {
  const reserve = Math.ceil(env.config.targetReserveShare * env.ctx.capacity(rank).numBlocks);
  return netFreeBlocks(env.ctx, rank) - env.inboundBlocks(rank) - reserve;
}

/**
 * Prefill tokens queued on `rank` beyond the routed request's own: waiting in its last report,
 * plus routed there since. A rank with queued prefill is about to run long steps even while its
 * last report still says idle (a burst of routes), and the request's own prefill is what a copy
 * would spare, so it does not count.
 */
export function queuedPrefillTokens(ctx: RoutingContext, rank: number): number {
  const own = ctx.reservations.get(ctx.query.requestId);
  const ownTokens = own && own.rank === rank && !own.queued ? own.tokens : 0;
  return Math.max(0, ctx.load(rank).waitingTokens + ctx.reservations.pendingTokens(rank) - ownTokens);
}

function planned(e: BlockEntry): PlannedBlock {
  return { hash: e.hash, parent: e.parent, srcBlock: e.block, generation: e.generation };
}

/**
 * Copies the prompt-prefix blocks `rank` lacks from the partner holding the longest prefix.
 * `feasible`: the route found room on `rank` for the whole request (the copied blocks replace
 * blocks the request would otherwise allocate, so that room covers the reservation).
 */
export function planPrefixCopy(env: PlannerEnv, rank: number, feasible: boolean): PlanVerdict {
  const { ctx, config } = env;
  const q = ctx.query;
  const bs = ctx.capacity(rank).blockSize;
  // The last prompt token is always computed: a block holding it is never a hit.
  const usable = Math.min(q.blockHashes.length, Math.floor(Math.max(0, q.promptTokens - 1) / bs));
  // Blocks a prompt routed there ahead of this one is about to compute need no copy either.
  const have = Math.min(ctx.expectedMatchedBlocks(rank), usable);
  if (have >= usable) {
    return skip("no_shortage", `rank ${rank} already holds ${have} of ${usable} usable prefix blocks`);
  }
  let src = -1;
  let best = have;
  for (const p of partnersOf(env, rank)) {
    const m = Math.min(ctx.match(p).blocks, usable);
    if (m > best) (best = m), (src = p);
  }
  if (src < 0) return skip("no_source", `no partner of rank ${rank} holds more than ${have} prefix blocks`);
  let start = have;
  while (start < best && env.inbound(rank, q.blockHashes[start]!)) start++;
  if (start >= best) return skip("inbound", `the missing prefix blocks are already arriving at rank ${rank}`);
  const table = ctx.blocks.table(src)!;
  const blocks: PlannedBlock[] = [];
  for (let i = start; i < Math.min(best, start + config.foregroundMaxBlocks); i++) {
    const h = q.blockHashes[i]!;
    const e = table.entries.get(h);
    if (!e || env.inbound(rank, h) || env.movingOut(src, h)) break;
    blocks.push(planned(e));
  }
  if (blocks.length === 0) return skip("source_invalid", `block ${start} of the prefix is leaving rank ${src}`);
  if (blocks.length < config.minBatchBlocks) {
    return skip("min_batch", `${blocks.length} blocks < minBatchBlocks ${config.minBatchBlocks}`);
  }
  if (!feasible) return skip("target_capacity", `rank ${rank} has no room for the request`);
  const est = env.cost.estimate(src, rank, blocks.length, env.blockBytes(src), env.queuedPrefillTokens);
  const savedMs = env.cost.savedPrefillMs(rank, blocks.length * bs);
  if (!env.cost.admits(savedMs, est.ms)) {
    return skip(
      "cost",
      `saves ${savedMs.toFixed(3)} ms, costs ~${est.ms.toFixed(3)} ms (${est.source}, ${
        est.waitMs.toFixed(3)
      } ms of it phase waits)`,
    );
  }
  return {
    ok: true,
    plan: {
      kind: "prefix-copy",
      mode: "copy",
      src,
      dst: rank,
      blocks,
      savedMs,
      estimatedMs: est.ms,
      estimateSource: est.source,
      waitMs: est.waitMs,
      requestId: q.requestId,
    },
  };
}

interface Segment {
  /** Root-first. */
  entries: BlockEntry[];
  /** The top block's parent is published on the source (so it must be on the target too). */
  needsParent: boolean;
}

/** Unreferenced chain suffixes of `rank` that could leave it whole, coldest first. */
function coldSegments(env: PlannerEnv, rank: number): Segment[] {
  const { ctx } = env;
  const table = ctx.blocks.table(rank)!;
  const wanted = new Set(ctx.query.blockHashes);
  const movable = (e: BlockEntry) =>
    e.refCount === 0 && !wanted.has(e.hash) && !ctx.blocks.isInFlight(rank, e.hash) && !env.movingOut(rank, e.hash);
  const out: Segment[] = [];
  for (const hash of table.leaves) {
    const leaf = table.entries.get(hash)!;
    if (leaf.refCount !== 0 || !movable(leaf)) continue;
    const entries = [leaf];
    for (
      let p = table.entries.get(leaf.parent);
      p && movable(p) && table.childCount.get(p.hash) === 1;
      p = table.entries.get(p.parent)
    ) entries.unshift(p);
    out.push({ entries, needsParent: table.entries.has(entries[0]!.parent) });
  }
  const leafOf = (s: Segment) => s.entries[s.entries.length - 1]!;
  // Physical block ids are unique on a rank: the order is total, whatever order the leaves came in.
  return out.sort((a, b) =>
    leafOf(a).accessCount - leafOf(b).accessCount || leafOf(a).lastAccess - leafOf(b).lastAccess ||
    leafOf(a).block - leafOf(b).block
  );
}

/**
 * Moves cold cached chains off `rank` to a partner with room, covering its block shortage. The
 * partner's reservation takes its free blocks (net of route reservations, which take free and then
 * the coldest cached blocks first), then reclaims its cache coldest first. Chains are taken coldest
 * first, so the chains taken up to one fit when they need no more than those free blocks plus the
 * partner's cached blocks colder than that chain's leaf: every block evicted makes room for a chain
 * hotter than it. The parents the chains hang from there are kept, never counted as room.
 */
export function planOffload(env: PlannerEnv, rank: number): PlanVerdict {
  const { ctx, config } = env;
  const shortage = ctx.reservations.reservedBlocks(rank) - ctx.capacity(rank).numFree;
  if (shortage <= 0) return skip("no_shortage", `rank ${rank} has enough free blocks`);
  const targets = partnersOf(env, rank).sort((a, b) => roomFor(env, b) - roomFor(env, a));
  if (targets.length === 0) return skip("no_target", `rank ${rank} has no healthy partner`);
  // Without colder cache as room, a partner's room is its free blocks: when none has any, no chain
  // fits, and the scan of this rank's cache below (the planner's costliest step) is skipped.
  if (!config.offloadIntoColderCache && roomFor(env, targets[0]!) <= 0) {
    return skip("target_capacity", `no partner of rank ${rank} has a free block`);
  }
  const segments = coldSegments(env, rank);
  if (segments.length === 0) return skip("source_invalid", `rank ${rank} has no unreferenced cached chain to move`);
  const bs = ctx.capacity(rank).blockSize;
  const parents = new Set(segments.filter((s) => s.needsParent).map((s) => s.entries[0]!.parent));
  let last = skip("target_capacity", `no partner of rank ${rank} has room`);
  for (const dst of targets) {
    const dstTable = ctx.blocks.table(dst)!;
    const free = roomFor(env, dst);
    // A partner short of free blocks itself reclaims its cache for its own requests: none of it
    // is room (on balanced load, moves between two short ranks only delayed their requests).
    const forecast = free < 0 || !config.offloadIntoColderCache
      ? undefined
      : new ReclaimForecast(dstTable, (e) =>
        e.refCount === 0 && !parents.has(e.hash) && !ctx.blocks.isInFlight(dst, e.hash) && !env.movingOut(dst, e.hash));
    const reclaimable = forecast?.reclaimable ?? 0;
    const chosen: BlockEntry[] = [];
    // Chains refused for lack of their parent there, for hotter cache only, for no room at all.
    let orphans = 0;
    let hotter = 0;
    let full = 0;
    let savedMs = 0;
    for (const s of segments) {
      if (chosen.length >= shortage) break;
      const top = s.entries[0]!;
      const leaf = s.entries[s.entries.length - 1]!;
      if (s.needsParent && !dstTable.entries.has(top.parent) && !env.inbound(dst, top.parent)) {
        orphans++;
        continue;
      }
      if (s.entries.some((e) => dstTable.entries.has(e.hash) || env.inbound(dst, e.hash))) continue;
      const fits = Math.min(free + (forecast?.colderThan(leaf) ?? 0), config.foregroundMaxBlocks);
      if (chosen.length + s.entries.length > fits) {
        if (chosen.length + s.entries.length <= Math.min(free + reclaimable, config.foregroundMaxBlocks)) hotter++;
        else full++;
        continue;
      }
      chosen.push(...s.entries);
      const reuse = Math.min(config.foregroundMaxReuse, leaf.accessCount) * config.foregroundReuseDiscount;
      savedMs += env.cost.savedPrefillMs(dst, s.entries.length * bs) * reuse;
    }
    if (chosen.length === 0) {
      if (hotter > 0) {
        last = skip(
          "target_hotter",
          `rank ${dst} has room only by evicting cache at least as hot as ${hotter} chains of rank ${rank}`,
        );
      } else if (orphans > 0 && full === 0) {
        last = skip("target_parent", `rank ${dst} lacks the parents of ${orphans} chains of rank ${rank}`);
      } else {last = skip(
          "target_capacity",
          `rank ${dst} has ${free} free and ${reclaimable} reclaimable blocks: no room for a chain of rank ${rank}`,
        );}
      continue;
    }
    if (chosen.length < config.minBatchBlocks) {
      last = skip("min_batch", `${chosen.length} blocks < minBatchBlocks ${config.minBatchBlocks}`);
      continue;
    }
    const est = env.cost.estimate(rank, dst, chosen.length, env.blockBytes(rank), env.queuedPrefillTokens);
    if (!env.cost.admits(savedMs, est.ms)) {
      last = skip(
        "cost",
        `moving ${chosen.length} blocks saves ${savedMs.toFixed(3)} ms, costs ~${
          est.ms.toFixed(3)
        } ms (${est.source}, ${est.waitMs.toFixed(3)} ms of it phase waits)`,
      );
      continue;
    }
    return {
      ok: true,
      plan: {
        kind: "offload",
        mode: "move",
        src: rank,
        dst,
        blocks: chosen.map(planned),
        savedMs,
        estimatedMs: est.ms,
        estimateSource: est.source,
        waitMs: est.waitMs,
        requestId: ctx.query.requestId,
      },
    };
  }
  return last;
}
