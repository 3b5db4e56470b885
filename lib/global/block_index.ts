/**
 * Hash -> which ranks publish it (and on which it has no live reference), as bitmasks, so one
 * walk down a query's hash chain finds every rank's longest prefix match: one map lookup per
 * block, whatever the number of ranks.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** Ranks are bits of a 32-bit integer. */
export const MAX_INDEXED_RANKS = 31;

interface Cell {
  /** Ranks publishing the hash. */
  holders: number;
  /** Of those, ranks where it has no live reference (reclaimable). */
  idle: number;
}

/** Bitmask index over every rank's published blocks. */
export class BlockIndex {
  readonly #cells = new Map<BlockHash, Cell>();

  /** Distinct hashes published anywhere. */
  get size(): number {
    return this.#cells.size;
  }

  /** Records that `rank` publishes `hash`. */
  add(rank: number, hash: BlockHash, idle: boolean): void {
    const bit = 1 << rank;
    let c = this.#cells.get(hash);
    if (!c) {
      c = { holders: 0, idle: 0 };
      this.#cells.set(hash, c);
    }
    c.holders |= bit;
    c.idle = idle ? c.idle | bit : c.idle & ~bit;
  }

  /** Records that `rank` no longer publishes `hash`. */
  remove(rank: number, hash: BlockHash): void {
    const c = this.#cells.get(hash);
    if (!c) return;
    const bit = 1 << rank;
    c.holders &= ~bit;
    c.idle &= ~bit;
    if (c.holders === 0) this.#cells.delete(hash);
  }

  /** Updates whether `hash` on `rank` has live references. */
  setIdle(rank: number, hash: BlockHash, idle: boolean): void {
    const c = this.#cells.get(hash);
    if (!c) return;
    const bit = 1 << rank;
    c.idle = idle ? c.idle | bit : c.idle & ~bit;
  }

  /** Bitmask of ranks publishing `hash`. */
  holders(hash: BlockHash): number {
    return this.#cells.get(hash)?.holders ?? 0;
  }

  /**
   * For every rank in `rankMask`, the length of the contiguous prefix of `hashes` it publishes
   * (into `blocks[rank]`) and how many of those are idle (into `idle[rank]`). Stops as soon as no
   * rank still matches.
   */
  matchAll(hashes: readonly BlockHash[], rankMask: number, blocks: Int32Array, idle: Int32Array): void {
    let alive = rankMask;
    for (let r = 0; r < blocks.length; r++) {
      blocks[r] = 0;
      idle[r] = 0;
    }
    let i = 0;
    for (; i < hashes.length && alive !== 0; i++) {
      const c = this.#cells.get(hashes[i]!);
      const still = c ? alive & c.holders : 0;
      let ended = alive & ~still;
      while (ended !== 0) {
        const r = 31 - Math.clz32(ended);
        blocks[r] = i;
        ended &= ~(1 << r);
      }
      if (c) {
        let idleHere = still & c.idle;
        while (idleHere !== 0) {
          const r = 31 - Math.clz32(idleHere);
          idle[r] = idle[r]! + 1;
          idleHere &= ~(1 << r);
        }
      }
      alive = still;
    }
    while (alive !== 0) {
      const r = 31 - Math.clz32(alive);
      blocks[r] = i;
      alive &= ~(1 << r);
    }
  }
}
