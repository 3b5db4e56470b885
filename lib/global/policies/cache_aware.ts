/**
 * Cache-aware routing as SGLang's router does it: when load is imbalanced (max - min outstanding
 * requests > abs threshold and max > rel threshold x min) go to the shortest queue; otherwise go
 * to the best prefix match if it covers more than the match threshold of the prompt, else to the
 * rank with the smallest cache tree. SGLang keeps an approximate radix tree of routed text; here
 * the tree is the real page table.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { best, byKeys, extent, type RoutingPolicy } from "./routing_policy.ts";

/** SGLang's cache_aware policy over the global page table. */
export class CacheAwarePolicy implements RoutingPolicy {
  readonly name = "cache-aware" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const cfg = ctx.config.cacheAware;
    const ranks = ctx.healthyRanks();
    const load = (r: number) => ctx.outstandingRequests(r);
    const { min, max } = extent(ranks, load);
    if (max - min > cfg.balanceAbsThreshold && max > min * cfg.balanceRelThreshold) {
      return { rank: best(ranks, byKeys(load)), reason: "balance" };
    }
    const top = best(ranks, byKeys((r) => -ctx.matchedBlocks(r), load));
    const promptTokens = Math.max(1, ctx.query.promptTokens);
    const matchRate = Math.min(1, (ctx.matchedBlocks(top) * ctx.capacity(top).blockSize) / promptTokens);
    if (matchRate > cfg.matchThreshold) return { rank: top, reason: "cache-hit" };
    return { rank: best(ranks, byKeys((r) => ctx.cachedBlocks(r), load)), reason: "smallest-tree" };
  }
}
