/**
 * Placement leases: after a background copy publishes, routing prefers its destination for that
 * prefix for a while (the copy was made to take load off the owner). The lease holds only while
 * the destination still publishes the copied chain and has room, and either its projected cost is
 * within leaseRouteBonusTokens of the policy's pick or the pick is still as much more loaded as
 * placement required (minLoadSkewTokens and minLoadSkewRatio of queue work). The second case routes
 * to a destination that holds only the copied part of a long prefix (a copy is capped at
 * backgroundCopyMaxBlocks per chain): the request prefills the rest there once, the destination
 * then holds the whole prefix, and routing balances the two by load. Its prefill shows in the
 * destination's queue work at once, so one such request at a time goes there. Leases apply to the
 * lmpool policy only (the baselines stay what they are).
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import { type Clock, realClock } from "../../core/clock.ts";
import { projectRouteCost } from "../../global/route_cost.ts";
import type { RouteAdvisor } from "../../global/route_advisor.ts";
import type { RouteChoice, RoutingContext } from "../../global/routing_context.ts";

interface Lease {
  rank: number;
  /** Blocks from the root up to and including the leased hash. */
  depth: number;
  until: number;
}

/** Active placement leases by the deepest copied hash. */
export class PlacementLeases implements RouteAdvisor {
  readonly #byHash = new Map<BlockHash, Lease[]>();
  readonly #clock: Clock;
  readonly #bonusTokens: number;
  readonly #skewTokens: number;
  readonly #skewRatio: number;
  /** Routes moved to a lease's rank, and routes the policy already sent there. */
  routed = 0;
  hits = 0;

  constructor(options: { bonusTokens: number; minLoadSkewTokens?: number; minLoadSkewRatio?: number; clock?: Clock }) {
    this.#bonusTokens = options.bonusTokens;
    this.#skewTokens = options.minLoadSkewTokens ?? Infinity;
    this.#skewRatio = options.minLoadSkewRatio ?? Infinity;
    this.#clock = options.clock ?? realClock;
  }

  /** Active leases. */
  get size(): number {
    let n = 0;
    for (const l of this.#byHash.values()) n += l.length;
    return n;
  }

  /** Grants (or extends) a lease of the chain ending at `hash` on `rank`. */
  grant(hash: BlockHash, depth: number, rank: number, durationMs: number): void {
    const until = this.#clock.now() + durationMs;
    const list = (this.#byHash.get(hash) ?? []).filter((l) => l.rank !== rank && l.until > this.#clock.now());
    list.push({ rank, depth, until });
    this.#byHash.set(hash, list);
  }

  /** Drops every lease of a rank (it died). */
  dropRank(rank: number): void {
    for (const [h, list] of this.#byHash) {
      const kept = list.filter((l) => l.rank !== rank);
      if (kept.length === 0) this.#byHash.delete(h);
      else this.#byHash.set(h, kept);
    }
  }

  advise(ctx: RoutingContext, choice: RouteChoice): RouteChoice | undefined {
    if (this.#byHash.size === 0 || ctx.config.policy !== "lmpool") return undefined;
    const now = this.#clock.now();
    const hashes = ctx.query.blockHashes;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const list = this.#byHash.get(hashes[i]!);
      if (!list) continue;
      const live = list.filter((l) => l.until > now);
      if (live.length === 0) {
        this.#byHash.delete(hashes[i]!);
        continue;
      }
      if (live.some((l) => l.rank === choice.rank)) {
        this.hits++;
        return undefined;
      }
      const candidates = ctx.topologyCandidates();
      const base = projectRouteCost(ctx, choice.rank);
      for (const l of live) {
        if (!candidates.includes(l.rank) || ctx.match(l.rank).blocks < l.depth) continue;
        const c = projectRouteCost(ctx, l.rank);
        const skewed = base.queueWork - c.queueWork >= this.#skewTokens &&
          base.queueWork >= this.#skewRatio * c.queueWork;
        // The bonus buys load spreading: only where the policy's pick has queued work to spread.
        const bonus = base.queueWork > 0 ? this.#bonusTokens : 0;
        if (c.feasible && (c.total <= base.total + bonus || skewed)) {
          this.routed++;
          return { rank: l.rank, reason: "lease" };
        }
      }
      return undefined;
    }
    return undefined;
  }
}
