/**
 * Weighted scorers as llm-d's default scheduler profile: prefix-cache (weight 3), queue depth
 * (weight 2, min-max normalised, fewer waiting is better) and KV-cache utilization (weight 2,
 * 1 - used fraction); the highest weighted sum wins.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { best, byKeys, extent, type RoutingPolicy } from "./routing_policy.ts";

/** llm-d's weighted scoring over prefix, queue and KV utilization. */
export class WeightedScorersPolicy implements RoutingPolicy {
  readonly name = "weighted-scorers" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const w = ctx.config.weightedScorers;
    const ranks = ctx.healthyRanks();
    const { min: qMin, max: qMax } = extent(ranks, (r) => ctx.waitingRequests(r));
    const nBlocks = Math.max(1, ctx.query.blockHashes.length);
    const score = (r: number) => {
      const prefix = ctx.matchedBlocks(r) / nBlocks;
      const queue = qMax === qMin ? 1 : (qMax - ctx.waitingRequests(r)) / (qMax - qMin);
      const kv = 1 - ctx.kvUtilization(r);
      return w.prefix * prefix + w.queue * queue + w.kvUtilization * kv;
    };
    const rank = best(ranks, byKeys((r) => -score(r), (r) => ctx.outstandingRequests(r)));
    return { rank, reason: "weighted-score" };
  }
}
