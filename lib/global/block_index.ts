/**
 * Hash -> which ranks publish it (and on which it has no live reference), as rank bitsets, so one
 * walk down a query's hash chain finds every rank's longest prefix match, whatever the number of
 * ranks.
 *
 * Each hash owns a slot in one flat Int32Array: `words` 32-bit words of holder bits, as many of
 * idle bits, then a child hint, a parent link, the parent's generation when linked and the slot's
 * own generation. The map's values are slot numbers (small integers), so the index holds no object
 * per hash for the collector to trace, and a slot's fields share a cache line. The width grows from
 * one word (ranks 0..31) only when a higher rank publishes, so a small cluster walks single words.
 *
 * A walk touches as few hash strings as it can: a map lookup or a comparison loads the string from
 * wherever the heap put it, which costs more than the rest of a block's step. Chained hashes allow
 * that. A block's hash covers its parent's, so when the slot reached by following child hints down
 * from a matched block holds the query's hash at that depth, every block passed on the way matches
 * too. A walk therefore follows hints (integers only) as far as they go, compares one hash at the
 * end, and on a mismatch finds where the hinted path left the query by binary search over it; only
 * there does it look the query's hash up in the map (and teach the parent that child). A hint is
 * followed only to a slot whose parent link points back and is current (a slot's generation changes
 * when it is freed), so a path is always a real chain, and a wrong hint costs a comparison, never
 * a match.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** Ranks the index can hold: ranks are 0..MAX_INDEXED_RANKS-1. */
export const MAX_INDEXED_RANKS = 256;

const RANKS_PER_WORD = 32;
const INITIAL_SLOTS = 1024;
const NO_SLOT = -1;
/** Offsets of the fields after the holder and idle words. */
const CHILD = 0;
const PARENT = 1;
const PARENT_GENERATION = 2;
const GENERATION = 3;
const LINK_FIELDS = 4;

/** Bitset index over every rank's published blocks. */
export class BlockIndex {
  readonly #slots = new Map<BlockHash, number>();
  /** The hash of each slot in use (undefined once freed), for confirming hinted paths. */
  readonly #hashOf: (BlockHash | undefined)[] = [];
  /** 32-bit words per rank set. */
  #words = 1;
  /** Int32s per slot: holder words, idle words, then the link fields. */
  #stride = 2 + LINK_FIELDS;
  #cells = new Int32Array(INITIAL_SLOTS * (2 + LINK_FIELDS));
  #slotCapacity = INITIAL_SLOTS;
  /** Slots released by remove, reused before new ones. */
  #freeSlots: number[] = [];
  /** Scratch of matchAll: the ranks still matching, one word per 32 ranks. */
  #alive = new Int32Array(1);
  /** Scratch of matchAll: the slots of the query's indexed prefix, root first. */
  #path = new Int32Array(256);

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
    if (parentSlot !== undefined && parentSlot !== slot) this.#link(parentSlot, slot);
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
    // No holder left (and so no idle bit either): the slot is free again. Unlinking it and moving
    // its generation on makes every hint and link that still names it stale.
    const link = base + 2 * words;
    cells[link + PARENT] = NO_SLOT;
    cells[link + GENERATION] = (cells[link + GENERATION]! + 1) | 0;
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
   * publishes (into `blocks[rank]`) and how many of those are idle (into `idle[rank]`). `idle`
   * must be at least as long as `blocks`.
   */
  matchAll(hashes: readonly BlockHash[], blocks: Int32Array, idle: Int32Array): void {
    const span = Math.min(blocks.length, this.#words * RANKS_PER_WORD);
    // Plain loops: a typed array's fill() is a runtime call that outweighs a handful of stores.
    for (let r = 0; r < blocks.length; r++) {
      blocks[r] = 0;
      idle[r] = 0;
    }
    if (span === 0 || hashes.length === 0) return;
    const depth = this.#indexedPrefix(hashes);
    if (depth === 0) return;
    if (this.#words === 1) this.#matchOneWord(depth, span, blocks, idle);
    else this.#matchWords(depth, span, blocks, idle);
  }

  /**
   * The length n of the longest prefix of `hashes` indexed on any rank, with the slots of
   * `hashes[0..n)` in `#path`.
   */
  #indexedPrefix(hashes: readonly BlockHash[]): number {
    const n = hashes.length;
    const hashOf = this.#hashOf;
    const first = this.#slots.get(hashes[0]!);
    if (first === undefined) return 0;
    const path = this.#pathOf(n);
    const cells = this.#cells;
    const stride = this.#stride;
    const words2 = 2 * this.#words;
    path[0] = first;
    let matched = 1; // hashes[0..matched) are the slots path[0..matched)
    while (matched < n) {
      // Follow hints down from the last matched block, then confirm the deepest with one comparison.
      let end = matched - 1;
      for (let at = path[end]!; end + 1 < n;) {
        // The hinted child of `at`, taken when its parent link names `at` and is current.
        const child = cells[at * stride + words2 + CHILD]!;
        if (child === NO_SLOT) break;
        const link = child * stride + words2;
        if (cells[link + PARENT] !== at) break;
        if (cells[link + PARENT_GENERATION] !== cells[at * stride + words2 + GENERATION]) break;
        path[++end] = at = child;
      }
      if (end >= matched) {
        if (hashOf[path[end]!] === hashes[end]) {
          matched = end + 1;
          continue;
        }
        // path[matched - 1] matches and path[end] does not: find where the path left the query.
        // Queries mostly end in a few new blocks, so the search gallops back from the end.
        let lo = matched - 1;
        let hi = end;
        for (let step = 1; hi - step > lo; step *= 2) {
          if (hashOf[path[hi - step]!] === hashes[hi - step]) {
            lo = hi - step;
            break;
          }
          hi -= step;
        }
        while (hi - lo > 1) {
          const mid = (lo + hi) >>> 1;
          if (hashOf[path[mid]!] === hashes[mid]) lo = mid;
          else hi = mid;
        }
        matched = lo + 1;
      }
      // The query's next block is not the hinted child: look it up, and hint it from now on.
      const slot = this.#slots.get(hashes[matched]!);
      if (slot === undefined) break;
      this.#link(path[matched - 1]!, slot);
      path[matched++] = slot;
    }
    return matched;
  }

  /** The scratch path, at least `n` long. */
  #pathOf(n: number): Int32Array {
    if (this.#path.length < n) this.#path = new Int32Array(Math.max(n, 2 * this.#path.length));
    return this.#path;
  }

  /** Makes `child` a child of `parent` (its parent link) and `parent`'s hinted child. */
  #link(parent: number, child: number): void {
    const cells = this.#cells;
    const stride = this.#stride;
    const words2 = 2 * this.#words;
    const link = child * stride + words2;
    cells[link + PARENT] = parent;
    cells[link + PARENT_GENERATION] = cells[parent * stride + words2 + GENERATION]!;
    cells[parent * stride + words2 + CHILD] = child;
  }

  // The common case (at most 32 ranks): the ranks still matching live in one local integer.
  #matchOneWord(depth: number, span: number, blocks: Int32Array, idle: Int32Array): void {
    const cells = this.#cells;
    const stride = this.#stride;
    const path = this.#path;
    let alive = span >= 32 ? -1 : ((1 << span) - 1) | 0;
    for (let i = 0; i < depth; i++) {
      const base = path[i]! * stride;
      const still = alive & cells[base]!;
      // Ranks that end here match i blocks; at i = 0 their zero is already written.
      if (i > 0) recordEnded(alive & ~still, 0, i, blocks);
      alive = still;
      if (alive === 0) return;
      countIdle(alive & cells[base + 1]!, 0, idle);
    }
    recordEnded(alive, 0, depth, blocks);
  }

  // Wider clusters: the same walk over `#words` words per rank set.
  #matchWords(depth: number, span: number, blocks: Int32Array, idle: Int32Array): void {
    const cells = this.#cells;
    const words = this.#words;
    const stride = this.#stride;
    const path = this.#path;
    const alive = this.#alive;
    for (let w = 0; w < words; w++) {
      const ranksHere = span - w * RANKS_PER_WORD;
      alive[w] = ranksHere >= 32 ? -1 : ranksHere <= 0 ? 0 : ((1 << ranksHere) - 1) | 0;
    }
    for (let i = 0; i < depth; i++) {
      const base = path[i]! * stride;
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
    for (let w = 0; w < words; w++) recordEnded(alive[w]!, w * RANKS_PER_WORD, depth, blocks);
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
    // A reused slot keeps the generation its freeing moved on, so links to its old hash stay stale.
    const link = slot * this.#stride + 2 * this.#words;
    this.#cells[link + CHILD] = NO_SLOT;
    this.#cells[link + PARENT] = NO_SLOT;
    return slot;
  }

  // Re-lays every slot at a width that holds `rank`.
  #widen(rank: number): void {
    const from = this.#words;
    const to = Math.floor(rank / RANKS_PER_WORD) + 1;
    const oldStride = this.#stride;
    const stride = 2 * to + LINK_FIELDS;
    const old = this.#cells;
    const cells = new Int32Array(this.#slotCapacity * stride);
    for (let s = 0; s < this.#hashOf.length; s++) {
      for (let w = 0; w < from; w++) {
        cells[s * stride + w] = old[s * oldStride + w]!;
        cells[s * stride + to + w] = old[s * oldStride + from + w]!;
      }
      for (let f = 0; f < LINK_FIELDS; f++) cells[s * stride + 2 * to + f] = old[s * oldStride + 2 * from + f]!;
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
