/**
 * Hash -> which ranks publish it (and on which it has no live reference), as rank bitsets, so one
 * walk down a query's hash chain finds every rank's longest prefix match: one lookup per block,
 * whatever the number of ranks.
 *
 * Each hash owns a slot in one flat Int32Array: `words` 32-bit words of holder bits, as many of
 * idle bits, and the slot of a child hash seen after it. The map's values are slot numbers (small
 * integers), so the index holds no object per hash for the collector to trace, and a slot's bits
 * share a cache line. The width grows from one word (ranks 0..31) only when a higher rank
 * publishes, so a small cluster walks single words.
 *
 * The child slot is a hint: a walk tries it first and confirms it by comparing the stored hash
 * with the query's, so a wrong or stale hint costs one comparison and never changes a match. A
 * chain's blocks are almost always walked in the order they were published, and following the
 * hint touches one slot where a map lookup touches the table's buckets as well.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** Ranks the index can hold: ranks are 0..MAX_INDEXED_RANKS-1. */
export const MAX_INDEXED_RANKS = 256;

const RANKS_PER_WORD = 32;
const INITIAL_SLOTS = 1024;
const NO_SLOT = -1;

/** Bitset index over every rank's published blocks. */
export class BlockIndex {
  readonly #slots = new Map<BlockHash, number>();
  /** The hash of each slot in use (undefined once freed), for confirming child hints. */
  readonly #hashOf: (BlockHash | undefined)[] = [];
  /** 32-bit words per rank set. */
  #words = 1;
  /** Int32s per slot: holder words, idle words, child hint. */
  #stride = 3;
  #cells = new Int32Array(INITIAL_SLOTS * 3);
  #slotCapacity = INITIAL_SLOTS;
  /** Slots released by remove, reused before new ones. */
  #freeSlots: number[] = [];
  /** Scratch of matchAll: the ranks still matching, one word per 32 ranks. */
  #alive = new Int32Array(1);

  /** Distinct hashes published anywhere. */
  get size(): number {
    return this.#slots.size;
  }

  /** One more than the highest rank the index can hold at its current width. */
  get rankWidth(): number {
    return this.#words * RANKS_PER_WORD;
  }

  /** Records that `rank` publishes `hash`, a child of `parent`. */
  add(rank: number, hash: BlockHash, idle: boolean, parent: BlockHash): void {
    checkRank(rank);
    if (rank >= this.#words * RANKS_PER_WORD) this.#widen(rank);
    let slot = this.#slots.get(hash);
    if (slot === undefined) {
      slot = this.#allocate(hash);
      this.#slots.set(hash, slot);
    }
    const words = this.#words;
    const at = slot * this.#stride + (rank >>> 5);
    const bit = 1 << (rank & 31);
    const cells = this.#cells;
    cells[at] = cells[at]! | bit;
    cells[at + words] = idle ? cells[at + words]! | bit : cells[at + words]! & ~bit;
    const parentSlot = this.#slots.get(parent);
    if (parentSlot !== undefined) cells[parentSlot * this.#stride + 2 * words] = slot;
  }

  /** Records that `rank` no longer publishes `hash`. */
  remove(rank: number, hash: BlockHash): void {
    const slot = this.#slots.get(hash);
    if (slot === undefined || rank >= this.#words * RANKS_PER_WORD) return;
    const words = this.#words;
    const base = slot * this.#stride;
    const at = base + (rank >>> 5);
    const keep = ~(1 << (rank & 31));
    const cells = this.#cells;
    cells[at] = cells[at]! & keep;
    cells[at + words] = cells[at + words]! & keep;
    for (let w = 0; w < words; w++) if (cells[base + w] !== 0) return;
    // No holder left (and so no idle bit either): the slot is free again.
    this.#slots.delete(hash);
    this.#hashOf[slot] = undefined;
    this.#freeSlots.push(slot);
  }

  /** Updates whether `hash` on `rank` has live references. */
  setIdle(rank: number, hash: BlockHash, idle: boolean): void {
    const slot = this.#slots.get(hash);
    if (slot === undefined || rank >= this.#words * RANKS_PER_WORD) return;
    const words = this.#words;
    const at = slot * this.#stride + (rank >>> 5);
    const bit = 1 << (rank & 31);
    const cells = this.#cells;
    if ((cells[at]! & bit) === 0) return; // not published there
    cells[at + words] = idle ? cells[at + words]! | bit : cells[at + words]! & ~bit;
  }

  /** Ranks publishing `hash`, ascending. */
  holderRanks(hash: BlockHash): number[] {
    const out: number[] = [];
    const slot = this.#slots.get(hash);
    if (slot === undefined) return out;
    const base = slot * this.#stride;
    for (let w = 0; w < this.#words; w++) {
      let bits = this.#cells[base + w]!;
      while (bits !== 0) {
        const low = bits & -bits;
        out.push(w * RANKS_PER_WORD + 31 - Math.clz32(low));
        bits ^= low;
      }
    }
    return out;
  }

  /**
   * For every rank below `blocks.length`, the length of the contiguous prefix of `hashes` it
   * publishes (into `blocks[rank]`) and how many of those are idle (into `idle[rank]`). Stops as
   * soon as no rank still matches. `idle` must be at least as long as `blocks`.
   */
  matchAll(hashes: readonly BlockHash[], blocks: Int32Array, idle: Int32Array): void {
    const span = Math.min(blocks.length, this.#words * RANKS_PER_WORD);
    blocks.fill(0);
    idle.fill(0, 0, blocks.length);
    if (span === 0 || hashes.length === 0) return;
    if (this.#words === 1) this.#matchOneWord(hashes, span, blocks, idle);
    else this.#matchWords(hashes, span, blocks, idle);
  }

  /** The slot of `hashes[i]` (the child hint of `prev` when it is that hash), or NO_SLOT. */
  #slotAt(hashes: readonly BlockHash[], i: number, prev: number): number {
    const hash = hashes[i]!;
    if (prev !== NO_SLOT) {
      const hinted = this.#cells[prev * this.#stride + 2 * this.#words]!;
      if (hinted !== NO_SLOT && this.#hashOf[hinted] === hash) return hinted;
    }
    const slot = this.#slots.get(hash);
    if (slot === undefined) return NO_SLOT;
    // Learn the edge, so the next walk down this chain takes the hint.
    if (prev !== NO_SLOT) this.#cells[prev * this.#stride + 2 * this.#words] = slot;
    return slot;
  }

  // The common case (at most 32 ranks): the ranks still matching live in one local integer.
  #matchOneWord(hashes: readonly BlockHash[], span: number, blocks: Int32Array, idle: Int32Array): void {
    const cells = this.#cells;
    let alive = span >= 32 ? -1 : ((1 << span) - 1) | 0;
    let slot = NO_SLOT;
    let i = 0;
    for (; i < hashes.length; i++) {
      slot = this.#slotAt(hashes, i, slot);
      if (slot === NO_SLOT) break;
      const still = alive & cells[slot * 3]!;
      // Ranks that end here match i blocks; at i = 0 their zero is already written.
      if (i > 0) recordEnded(alive & ~still, 0, i, blocks);
      alive = still;
      if (alive === 0) return;
      countIdle(alive & cells[slot * 3 + 1]!, 0, idle);
    }
    if (i > 0) recordEnded(alive, 0, i, blocks);
  }

  // Wider clusters: the same walk over `#words` words per rank set.
  #matchWords(hashes: readonly BlockHash[], span: number, blocks: Int32Array, idle: Int32Array): void {
    const cells = this.#cells;
    const words = this.#words;
    const stride = this.#stride;
    const alive = this.#alive;
    for (let w = 0; w < words; w++) {
      const ranksHere = span - w * RANKS_PER_WORD;
      alive[w] = ranksHere >= 32 ? -1 : ranksHere <= 0 ? 0 : ((1 << ranksHere) - 1) | 0;
    }
    let slot = NO_SLOT;
    let i = 0;
    for (; i < hashes.length; i++) {
      slot = this.#slotAt(hashes, i, slot);
      if (slot === NO_SLOT) break;
      const base = slot * stride;
      let any = 0;
      for (let w = 0; w < words; w++) {
        const was = alive[w]!;
        if (was === 0) continue;
        const still = was & cells[base + w]!;
        if (i > 0) recordEnded(was & ~still, w * RANKS_PER_WORD, i, blocks);
        alive[w] = still;
        any |= still;
        countIdle(still & cells[base + words + w]!, w * RANKS_PER_WORD, idle);
      }
      if (any === 0) return;
    }
    if (i > 0) { for (let w = 0; w < words; w++) recordEnded(alive[w]!, w * RANKS_PER_WORD, i, blocks); }
  }

  #allocate(hash: BlockHash): number {
    let slot = this.#freeSlots.pop();
    if (slot === undefined) {
      slot = this.#hashOf.length;
      this.#hashOf.push(hash);
      if (slot === this.#slotCapacity) {
        this.#slotCapacity *= 2;
        const grown = new Int32Array(this.#slotCapacity * this.#stride);
        grown.set(this.#cells);
        this.#cells = grown;
      }
    } else {
      this.#hashOf[slot] = hash;
    }
    this.#cells[slot * this.#stride + 2 * this.#words] = NO_SLOT;
    return slot;
  }

  // Re-lays every slot at a width that holds `rank`.
  #widen(rank: number): void {
    const from = this.#words;
    const to = Math.floor(rank / RANKS_PER_WORD) + 1;
    const oldStride = this.#stride;
    const stride = 2 * to + 1;
    const old = this.#cells;
    const cells = new Int32Array(this.#slotCapacity * stride);
    for (let s = 0; s < this.#hashOf.length; s++) {
      for (let w = 0; w < from; w++) {
        cells[s * stride + w] = old[s * oldStride + w]!;
        cells[s * stride + to + w] = old[s * oldStride + from + w]!;
      }
      cells[s * stride + 2 * to] = old[s * oldStride + 2 * from]!;
    }
    this.#cells = cells;
    this.#words = to;
    this.#stride = stride;
    this.#alive = new Int32Array(to);
  }
}

function checkRank(rank: number): void {
  if (!Number.isInteger(rank) || rank < 0 || rank >= MAX_INDEXED_RANKS) {
    throw new RangeError(`rank must be an integer in 0..${MAX_INDEXED_RANKS - 1}, got ${rank}`);
  }
}

/** Writes `length` for every rank whose bit is set in `ended` (bit b of the word is rank offset + b). */
function recordEnded(ended: number, offset: number, length: number, blocks: Int32Array): void {
  while (ended !== 0) {
    const low = ended & -ended;
    blocks[offset + 31 - Math.clz32(low)] = length;
    ended ^= low;
  }
}

/** Counts one idle block for every rank whose bit is set in `bits`. */
function countIdle(bits: number, offset: number, idle: Int32Array): void {
  while (bits !== 0) {
    const low = bits & -bits;
    const r = offset + 31 - Math.clz32(low);
    idle[r] = idle[r]! + 1;
    bits ^= low;
  }
}
