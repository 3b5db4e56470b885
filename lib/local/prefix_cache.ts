/**
 * The prefix cache of one KV cache: which Ready block holds each published hash, how many
 * published blocks chain to each parent hash, and the reclamation that frees unreferenced entries
 * back into the BlockPool. Together with the BlockPool's free list this is what vLLM v1 calls its
 * block pool (free queue, hash -> block map, eviction order); it is a class of its own here because
 * reclamation is dependency-aware (leaves only), so the eviction order cannot be the free list's.
 *
 * Every reference and pin change of a published block goes through this class, because whether a
 * block counts as reclaimable (published, no references, no pins) depends on all three.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockEntry } from "../core/block_snapshot.ts";
import type { BlockManagerState } from "./block_invariants.ts";
import type { BlockPool } from "./block_pool.ts";
import type { BlockPublisher } from "./block_publisher.ts";
import { BlockUsage } from "./block_usage.ts";
import { type ReclaimCandidate, ReclaimOrder } from "./reclaim_order.ts";

/** The prefix-cache part of the state block_invariants.ts checks. */
export type PrefixCacheState = Omit<BlockManagerState, "pool" | "numReserved">;

/** Hash -> block map, chain child counts, usage and dependency-safe reclamation over a BlockPool. */
export class PrefixCache {
  /** False: nothing is ever published, so every block is freed at its last reference. */
  readonly enabled: boolean;
  readonly #pool: BlockPool;
  readonly #publisher: BlockPublisher;
  readonly #now: () => number;
  readonly #usage: BlockUsage;
  /** hash -> its registered (published, Ready) block. */
  readonly #cached = new Map<BlockHash, number>();
  /** Hash of each registered block (null: unregistered). */
  readonly #hashOf: (BlockHash | null)[];
  readonly #parentOf: BlockHash[];
  /** parent hash -> number of registered blocks chained to it. */
  readonly #children = new Map<BlockHash, number>();
  /** Registered blocks with no references and no pins. */
  #numReclaimable = 0;
  readonly #reclaimOrder = new ReclaimOrder();

  /**
   * A prefix cache over `pool`; registrations, uses and removals are reported to `publisher`, and
   * `now` (ms) stamps each use.
   */
  constructor(pool: BlockPool, publisher: BlockPublisher, now: () => number, enabled: boolean) {
    this.#pool = pool;
    this.#publisher = publisher;
    this.#now = now;
    this.enabled = enabled;
    this.#usage = new BlockUsage(pool.numBlocks);
    this.#hashOf = new Array<BlockHash | null>(pool.numBlocks).fill(null);
    this.#parentOf = new Array<BlockHash>(pool.numBlocks).fill("");
  }

  /** Unreferenced, unpinned registered blocks (free-able by reclamation). */
  get numReclaimable(): number {
    return this.#numReclaimable;
  }

  /** The registered block of a hash, if cached here. */
  blockOf(hash: BlockHash): number | undefined {
    return this.#cached.get(hash);
  }

  /** The hash a block is registered under; null when it is not published. */
  hashOf(b: number): BlockHash | null {
    return this.#hashOf[b]!;
  }

  /** Accesses of a block since it was published. */
  accessCount(b: number): number {
    return this.#usage.accessCount(b);
  }

  /**
   * Publishes a Ready block under `hash`, chained to `parent`, unless caching is off or the hash is
   * already cached (the duplicate stays private and is freed at its last reference, so a hash
   * always names exactly one block). Returns whether it was registered. `accesses` starts its use
   * count (see BlockUsage.begin).
   */
  register(b: number, hash: BlockHash, parent: BlockHash, now: number, accesses = 1): boolean {
    if (!this.enabled || this.#cached.has(hash)) return false;
    this.#cached.set(hash, b);
    this.#hashOf[b] = hash;
    this.#parentOf[b] = parent;
    this.#children.set(parent, (this.#children.get(parent) ?? 0) + 1);
    this.#usage.begin(b, now, accesses);
    this.#publisher.markAdded(b);
    return true;
  }

  /** Records a use of a published block: `access` counts a prefix hit, a release only refreshes recency. */
  touch(b: number, now: number, access: boolean): void {
    this.#usage.touch(b, now, access);
    this.#publisher.markTouched(b);
  }

  // ---- references and pins -----------------------------------------------------------------

  /** Adds a sequence reference to a cached block (a prefix hit). */
  acquire(b: number): void {
    if (this.#pool.refCount[b] === 0 && this.#pool.pinCount[b] === 0 && this.#hashOf[b] !== null) {
      this.#numReclaimable--;
    }
    this.#pool.refCount[b]!++;
  }

  /**
   * Drops a sequence reference. An unpublished block is freed at zero; a published one is touched
   * and, at zero references and pins, stays as a reclaimable entry.
   */
  release(b: number): void {
    if (this.#pool.refCount[b]! <= 0) throw new Error(`block ${b} released with refCount=${this.#pool.refCount[b]}`);
    this.#pool.refCount[b]!--;
    if (this.#hashOf[b] === null) {
      if (this.#pool.refCount[b] === 0 && this.#pool.pinCount[b] === 0) this.#pool.release(b);
      return;
    }
    this.touch(b, this.#now(), false);
    if (this.#pool.refCount[b] === 0 && this.#pool.pinCount[b] === 0) this.becameUnreferenced(b);
  }

  /** Adds a transfer pin to a published block: it is no longer reclaimable. */
  pin(b: number): void {
    if (this.#pool.refCount[b] === 0 && this.#pool.pinCount[b] === 0) this.#numReclaimable--;
    this.#pool.pinCount[b]!++;
  }

  /** Drops a transfer pin (the caller checked there is one). */
  unpin(b: number): void {
    this.#pool.pinCount[b]!--;
    if (this.#pool.pinCount[b] === 0 && this.#pool.refCount[b] === 0) this.becameUnreferenced(b);
  }

  /** A registered block just lost its last reference or pin (or was published without any). */
  becameUnreferenced(b: number): void {
    this.#numReclaimable++;
    this.#offerForReclaim(b);
  }

  // ---- reclamation ---------------------------------------------------------------------------

  /** Frees blocks by reclamation until `n` are free; false (reclaiming nothing) when impossible. */
  ensureFree(n: number): boolean {
    if (this.#pool.numFree >= n) return true;
    if (this.#pool.numFree + this.#numReclaimable < n) return false;
    while (this.#pool.numFree < n) {
      const c = this.#reclaimOrder.pop(this.#isCurrent);
      // Only non-leaves whose cached children are live remain: they cannot be freed yet.
      if (c === undefined) return false;
      this.#reclaim(c.block);
    }
    this.#reclaimOrder.compact(this.#isCurrent, 4 * this.#pool.numBlocks);
    return true;
  }

  /**
   * Frees a chain's blocks from its tail while each is an unreferenced, unpinned leaf; stops at the
   * first that is not. Returns the blocks freed.
   */
  reclaimSuffix(blocks: readonly number[]): number[] {
    const out: number[] = [];
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i]!;
      this.#pool.checkId(b);
      if (!this.#isReclaimableLeaf(b)) break;
      this.#reclaim(b);
      out.push(b);
    }
    return out;
  }

  // ---- reports -------------------------------------------------------------------------------

  /** The report entry of a published block. */
  entry(b: number): BlockEntry {
    return {
      hash: this.#hashOf[b]!,
      parent: this.#parentOf[b]!,
      block: b,
      generation: this.#pool.generation[b]!,
      refCount: this.#pool.refCount[b]!,
      lastAccess: this.#usage.lastAccess(b),
      accessCount: this.#usage.accessCount(b),
    };
  }

  /** Report entries of every published block, in registration order. */
  entries(): BlockEntry[] {
    return [...this.#cached.values()].map((b) => this.entry(b));
  }

  /** Read-only views of the bookkeeping, for the invariant checker. */
  state(): PrefixCacheState {
    return {
      cached: this.#cached,
      hashOf: this.#hashOf,
      parentOf: this.#parentOf,
      children: this.#children,
      numReclaimable: this.#numReclaimable,
    };
  }

  // ---- internals ---------------------------------------------------------------------------

  #offerForReclaim(b: number): void {
    if (!this.#isReclaimableLeaf(b)) return;
    this.#reclaimOrder.push(this.#usage.candidate(b, this.#pool.generation[b]!));
  }

  #isReclaimableLeaf(b: number): boolean {
    const h = this.#hashOf[b];
    return h != null && this.#pool.refCount[b] === 0 && this.#pool.pinCount[b] === 0 && !this.#children.has(h);
  }

  #isCurrent = (c: ReclaimCandidate): boolean =>
    this.#pool.generation[c.block] === c.generation && this.#usage.unchangedSince(c) &&
    this.#isReclaimableLeaf(c.block);

  /** Unpublishes and frees an unreferenced leaf; its parent may become a leaf. */
  #reclaim(b: number): void {
    const hash = this.#hashOf[b]!;
    const parent = this.#parentOf[b]!;
    this.#cached.delete(hash);
    this.#hashOf[b] = null;
    this.#publisher.markRemoved(b, hash, this.#pool.generation[b]!);
    const left = (this.#children.get(parent) ?? 1) - 1;
    if (left > 0) this.#children.set(parent, left);
    else this.#children.delete(parent);
    this.#numReclaimable--;
    this.#pool.release(b);
    const p = this.#cached.get(parent);
    if (left === 0 && p !== undefined) this.#offerForReclaim(p);
  }
}
