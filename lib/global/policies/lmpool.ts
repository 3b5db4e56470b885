/**
 * The lmpool policy: among the ingress rank and its direct partners (every healthy rank without an
 * ingress), the capacity-feasible rank of least latency cost wins (route_time.ts: the device's
 * queued prefill, this request's own prefill times the requests on the device that wait for it,
 * and the prefill of what its blocks would evict). Ties (ranks of
 * one GPU cost the same but for their prefixes) go to the rank with fewer requests, then more room,
 * then the lower rank. When no rank has room now,
 * the request queues where the shortage is smallest.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { emptyRouteCost, projectRouteCost, type RouteCost } from "../route_cost.ts";
import { emptyRouteTime, projectRouteTime, type RouteTime } from "../route_time.ts";
import type { RoutingPolicy } from "./routing_policy.ts";

/** One candidate's projection. */
interface Priced {
  cost: RouteCost;
  time: RouteTime;
}

/** The cost-model policy (the default). */
export class LmpoolPolicy implements RoutingPolicy {
  readonly name = "lmpool" as const;
  // Two projections rewritten on every route, the candidate's and the best so far: pricing every
  // rank of a large cluster would otherwise leave two objects per rank per route to the collector.
  #candidate: Priced = { cost: emptyRouteCost(), time: emptyRouteTime() };
  #best: Priced = { cost: emptyRouteCost(), time: emptyRouteTime() };

  choose(ctx: RoutingContext): RouteChoice {
    const ranks = ctx.topologyCandidates();
    let found = false;
    // With no feasible rank: the most headroom among ranks it can ever fit, else among all
    // (the first in candidate order on equal headroom).
    let roomiest = -1, roomiestHeadroom = -Infinity;
    let roomiestFit = -1, roomiestFitHeadroom = -Infinity;
    for (const r of ranks) {
      const c = this.#candidate;
      projectRouteCost(ctx, r, c.cost);
      if (!c.cost.feasible) {
        if (c.cost.headroom > roomiestHeadroom) {
          roomiest = r;
          roomiestHeadroom = c.cost.headroom;
        }
        if (!c.cost.neverFits && c.cost.headroom > roomiestFitHeadroom) {
          roomiestFit = r;
          roomiestFitHeadroom = c.cost.headroom;
        }
        continue;
      }
      projectRouteTime(ctx, r, c.cost, ctx.speeds, c.time);
      if (!found || better(ctx, c, this.#best)) {
        this.#candidate = this.#best;
        this.#best = c;
        found = true;
      }
    }
    if (!found) return { rank: roomiestFit >= 0 ? roomiestFit : roomiest, reason: "infeasible" };
    const rank = this.#best.cost.rank;
    return { rank, reason: ctx.matchedBlocks(rank) > 0 ? "prefix-hit" : "least-cost" };
  }
}

/** Relative difference under which two costs tie (the model is not that exact). */
const TIE = 1e-6;

/** a is the better choice: lower cost, then fewer requests, then more headroom, then ingress affinity, then lower rank. */
function better(ctx: RoutingContext, a: Priced, b: Priced): boolean {
  const ta = a.time.totalMs, tb = b.time.totalMs;
  if (Math.abs(ta - tb) > TIE * Math.max(ta, tb)) return ta < tb;
  // Equal cost happens between ranks of one GPU: spread requests over them, then blocks.
  const oa = ctx.outstandingRequests(a.cost.rank), ob = ctx.outstandingRequests(b.cost.rank);
  if (oa !== ob) return oa < ob;
  if (a.cost.headroom !== b.cost.headroom) return a.cost.headroom > b.cost.headroom;
  const ingress = ctx.query.ingressRank;
  if (ingress !== undefined && ctx.topology) {
    const d = ctx.topology.affinity(ingress, a.cost.rank) - ctx.topology.affinity(ingress, b.cost.rank);
    if (d !== 0) return d > 0;
  }
  return a.cost.rank < b.cost.rank;
}
