/**
 * The lmpool routing cost of one candidate rank, in device milliseconds: the latency the request
 * adds to everyone, itself included, if it goes there.
 *
 *   cost(r) = s_p(r) x [wait + prefill x (1 + others) + reclaim]
 *
 * - wait: the prefill ahead of this request on r: its queue (waiting and routed-but-unreported
 *   prompt tokens) and the prefills r admitted but has not finished (admitted_prefills.ts: its
 *   load counts them as running, yet they hold the device), each priced as an average one of them;
 * - prefill: this request's own prefill on r, only the tokens r will not hold when it runs there (its
 *   published prefix, or the blocks of prompts routed to r ahead of it and not yet prefilled:
 *   pending_prefixes.ts), with the attention over its cached prefix and the per-sequence cost of a
 *   prefill chunk (device_cost.ts); `others`
 *   is every request running or queued on r, each of which waits that long once more (a prefill
 *   chunk shares their steps): in full for a request still before its first token (queued, or
 *   admitted with its prefill unfinished), at decodeWaitWeight for one that decodes (a token gap,
 *   routing_weights.ts);
 * - reclaim: the prefill of the cached tokens its new blocks would evict, at reclaimTokenWeight
 *   (half may be asked for again);
 * - s_p: r's measured prefill speed against the model (DeviceSpeeds).
 * The per-sequence term is what makes a queue of prefix hits cost what it does: each hit computes a
 * few tokens, yet each adds a chunk (launches, sampling) to the step it shares, so hits queued on
 * one rank are not free, and simultaneous arrivals spread instead of sharing a step.
 * The request's decode is left out: continuous batching takes one more sequence into the next step
 * at a marginal cost, and pricing each rank's whole decode step made routing chase batch sizes at
 * the expense of first tokens.
 * A rank's decode load still counts through `others`, who wait for every prefill it takes.
 * The queue is the rank's and the speed is the device's: ranks sharing one GPU are time-sliced by
 * it, each getting an equal share while busy, so a rank's own queue drains at its share of the
 * device, and its measured steps stretch by as much as its partners keep the device busy (which
 * the speed ratios carry). A rank piled with requests on a shared GPU is therefore as slow for
 * them as a slower GPU would be, and an idle partner's speed-up shows in the ratios within a report. A prefix hit therefore wins by
 * the prefill it saves, times the requests that would otherwise wait for that prefill; a busy
 * device loses by the queue ahead and the batch it would join. No per-workload switch: the same
 * sum decides a hot prefix (stay: its prefill is expensive and every sharer waits for it), an
 * overloaded owner (leave: its queue outweighs the prefill) and a cold prompt (the least loaded
 * device with room).
 * @module
 */
import { type DeviceSpeeds, prefillMs } from "./device_cost.ts";
import type { RouteCost } from "./route_cost.ts";
import type { RoutingContext } from "./routing_context.ts";

/** The parts of one rank's routing cost, ms. */
export interface RouteTime {
  rank: number;
  waitMs: number;
  prefillMs: number;
  /** Prefill time the others on the rank wait for. */
  externalMs: number;
  reclaimMs: number;
  totalMs: number;
}

/** A RouteTime to overwrite (see emptyRouteCost). */
export function emptyRouteTime(): RouteTime {
  return { rank: 0, waitMs: 0, prefillMs: 0, externalMs: 0, reclaimMs: 0, totalMs: 0 };
}

/**
 * Projects the latency cost of routing `ctx.query` to `rank` (`cost` gives its eviction), into
 * `out` when given.
 */
export function projectRouteTime(
  ctx: RoutingContext,
  rank: number,
  cost: RouteCost,
  speeds: DeviceSpeeds,
  out: RouteTime = emptyRouteTime(),
): RouteTime {
  const m = speeds.model;
  const pr = speeds.prefillRatio(rank);
  const q = ctx.query;
  // The rank's load, routed-but-unreported work included.
  const l = ctx.load(rank);
  const queued = l.numWaiting + ctx.reservations.pendingRequests(rank);
  // Ahead of it: the queue, and the prefills the rank admitted but has not finished (running by
  // its load, yet holding the device), each priced as an average one of them.
  const admitted = ctx.prefills.requests(rank);
  const ahead = queued + admitted;
  const aheadTokens = l.waitingTokens + ctx.reservations.pendingTokens(rank) + ctx.prefills.tokens(rank);
  const waitMs = ahead > 0 ? pr * ahead * prefillMs(m, aheadTokens / ahead, 0) : 0;
  const cached = ctx.expectedCachedTokens(rank);
  const own = pr * prefillMs(m, q.promptTokens - cached, cached);
  // The running requests whose prefill is done decode: a new prefill costs them one token gap.
  const decoding = Math.max(0, l.numRunning - admitted);
  const others = ahead + ctx.config.cost.decodeWaitWeight * decoding;
  const externalMs = own * others;
  const reclaimMs = pr * (cost.reclaimPressure * m.prefillTokenMs);
  out.rank = rank;
  out.waitMs = waitMs;
  out.prefillMs = own;
  out.externalMs = externalMs;
  out.reclaimMs = reclaimMs;
  out.totalMs = waitMs + own + externalMs + reclaimMs;
  return out;
}
