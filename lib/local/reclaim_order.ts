/**
 * The order in which unreferenced cached blocks are reclaimed: least frequently used first, then
 * least recently used. A min-heap with lazy deletion: entries are pushed whenever a block becomes (or
 * re-becomes) a reclaimable leaf, and each pop re-validates the entry against the block's current
 * state, so keys never need updating in place.
 * @module
 */

/** One candidate: the block and the key it had when pushed. */
export interface ReclaimCandidate {
  block: number;
  generation: number;
  accessCount: number;
  /** Logical recency tick (monotonic counter; larger = more recent). */
  tick: number;
}

function before(a: ReclaimCandidate, b: ReclaimCandidate): boolean {
  return a.accessCount !== b.accessCount ? a.accessCount < b.accessCount : a.tick < b.tick;
}

/** LFU-then-LRU min-heap of reclaim candidates with lazy invalidation. */
export class ReclaimOrder {
  #heap: ReclaimCandidate[] = [];

  get size(): number {
    return this.#heap.length;
  }

  push(c: ReclaimCandidate): void {
    const h = this.#heap;
    h.push(c);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  /** Removes and returns the first entry `isValid` accepts, dropping stale ones on the way. */
  pop(isValid: (c: ReclaimCandidate) => boolean): ReclaimCandidate | undefined {
    while (this.#heap.length > 0) {
      const top = this.#popTop();
      if (isValid(top)) return top;
    }
    return undefined;
  }

  /** Drops stale entries when they dominate the heap (bounded memory under churn). */
  compact(isValid: (c: ReclaimCandidate) => boolean, limit: number): void {
    if (this.#heap.length <= limit) return;
    const keep = this.#heap.filter(isValid);
    this.#heap = [];
    for (const c of keep) this.push(c);
  }

  #popTop(): ReclaimCandidate {
    const h = this.#heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l]!, h[m]!)) m = l;
        if (r < h.length && before(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}
