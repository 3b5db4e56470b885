/**
 * How much of a rank's prefix cache that rank's own reclamation would free before it reached a
 * block at least as hot as a given one: the room a move may take there without evicting cache
 * worth more than what it brings.
 *
 * Workers reclaim dependency-safely (leaves only) in LFU-then-LRU order. Whatever the order among
 * ties, such a reclamation frees every block strictly colder than a threshold that can be peeled
 * off as a colder leaf before it frees any other block; so the room under a threshold is the
 * number of blocks that can go (unreferenced, not locked by a plan, not kept) and are, with every
 * cached block below them, strictly colder than it. The forecast computes the hottest key of each
 * block's subtree once (leaf first, O(n)) and answers any threshold by binary search.
 * Keys compare (accessCount, lastAccess); workers stamp lastAccess with the host clock, so the keys
 * of different ranks of one host compare.
 * @module
 */
import type { BlockEntry } from "../../core/block_snapshot.ts";
import type { RankTable } from "../../global/rank_table.ts";

/** The reclamation key of a cached block: fewer accesses first, then older last access. */
export interface Hotness {
  accessCount: number;
  lastAccess: number;
}

/** True when `a` is reclaimed strictly before `b` (LFU, then LRU). */
export function isColder(a: Hotness, b: Hotness): boolean {
  return a.accessCount !== b.accessCount ? a.accessCount < b.accessCount : a.lastAccess < b.lastAccess;
}

/** Above every real key: a subtree holding a block that cannot go. */
const NEVER: Hotness = { accessCount: Infinity, lastAccess: Infinity };

/** The reclaim room of one rank's published blocks under any hotness threshold. */
export class ReclaimForecast {
  /** Hottest key of each goable block's subtree (the threshold it needs), coldest first. */
  readonly #needs: Hotness[] = [];

  /** `canGo`: the block may be reclaimed at all (unreferenced, unlocked, not kept). */
  constructor(table: RankTable, canGo: (e: BlockEntry) => boolean) {
    const hottestBelow = new Map<string, Hotness>();
    const childrenLeft = new Map<string, number>();
    const ready: BlockEntry[] = [];
    for (const hash of table.leaves) ready.push(table.entries.get(hash)!);
    for (let e = ready.pop(); e; e = ready.pop()) {
      let need: Hotness = canGo(e) ? e : NEVER;
      const below = hottestBelow.get(e.hash);
      if (below && isColder(need, below)) need = below;
      if (need !== NEVER) this.#needs.push(need);
      const p = table.entries.get(e.parent);
      if (!p) continue;
      const seen = hottestBelow.get(p.hash);
      if (!seen || isColder(seen, need)) hottestBelow.set(p.hash, need);
      const left = (childrenLeft.get(p.hash) ?? table.childCount.get(p.hash) ?? 1) - 1;
      childrenLeft.set(p.hash, left);
      if (left === 0) ready.push(p);
    }
    this.#needs.sort((a, b) => (isColder(a, b) ? -1 : isColder(b, a) ? 1 : 0));
  }

  /** Blocks that can go at all, whatever their hotness. */
  get reclaimable(): number {
    return this.#needs.length;
  }

  /** Blocks reclamation frees, strictly colder than `hot`, before it touches any block as hot. */
  colderThan(hot: Hotness): number {
    let lo = 0;
    let hi = this.#needs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (isColder(this.#needs[mid]!, hot)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
