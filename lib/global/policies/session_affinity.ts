/**
 * Session affinity: requests of one session stick to the rank its first request went to (its
 * conversation prefix lives there); requests without a session, and sessions whose rank died,
 * fall back to the lmpool policy.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { LmpoolPolicy } from "./lmpool.ts";
import type { RoutingPolicy } from "./routing_policy.ts";

/** Sticky routing by session id, bounded LRU memory, lmpool fallback. */
export class SessionAffinityPolicy implements RoutingPolicy {
  readonly name = "session-affinity" as const;
  readonly #fallback = new LmpoolPolicy();
  // Map iteration order is insertion order: re-inserting on use makes the head least recent.
  readonly #sessions = new Map<string, number>();

  constructor(readonly maxSessions: number) {
    if (!Number.isInteger(maxSessions) || maxSessions < 1) {
      throw new RangeError(`maxSessions must be an integer >= 1, got ${maxSessions}`);
    }
  }

  /** Sessions currently remembered. */
  get size(): number {
    return this.#sessions.size;
  }

  choose(ctx: RoutingContext): RouteChoice {
    const sid = ctx.query.sessionId;
    if (sid === undefined) return this.#fallback.choose(ctx);
    const sticky = this.#sessions.get(sid);
    if (sticky !== undefined && ctx.blocks.isHealthy(sticky)) {
      this.#remember(sid, sticky);
      return { rank: sticky, reason: "session" };
    }
    const choice = this.#fallback.choose(ctx);
    this.#remember(sid, choice.rank);
    return { rank: choice.rank, reason: sticky === undefined ? "session-new" : "session-moved" };
  }

  forgetRank(rank: number): void {
    for (const [sid, r] of this.#sessions) if (r === rank) this.#sessions.delete(sid);
  }

  #remember(sid: string, rank: number): void {
    this.#sessions.delete(sid);
    this.#sessions.set(sid, rank);
    if (this.#sessions.size > this.maxSessions) this.#sessions.delete(this.#sessions.keys().next().value!);
  }
}
