/**
 * The interface every routing policy implements, and the rank-ordering helpers policies share.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";

/** Picks a rank for one query. Called only when at least one rank is healthy. */
export interface RoutingPolicy {
  /** Its name in the registry (policy_registry.ts). */
  readonly name: string;
  choose(ctx: RoutingContext): RouteChoice;
  /** Forgets per-rank state (the rank died). */
  forgetRank?(rank: number): void;
}

/** Compares by several keys in order (for tie-breaks); negative when a sorts first. */
export function byKeys(...keys: ((rank: number) => number)[]): (a: number, b: number) => number {
  return (a, b) => {
    for (const k of keys) {
      const d = k(a) - k(b);
      if (d !== 0) return d;
    }
    return a - b;
  };
}

/** The first of `ranks` under `compare`. */
export function best(ranks: readonly number[], compare: (a: number, b: number) => number): number {
  let out = ranks[0]!;
  for (let i = 1; i < ranks.length; i++) if (compare(ranks[i]!, out) < 0) out = ranks[i]!;
  return out;
}

/** The smallest and largest `value` over `ranks` (Infinity and -Infinity when there are none). */
export function extent(ranks: readonly number[], value: (rank: number) => number): { min: number; max: number } {
  let max = -Infinity;
  let min = Infinity;
  for (const r of ranks) {
    const v = value(r);
    max = Math.max(max, v);
    min = Math.min(min, v);
  }
  return { min, max };
}
