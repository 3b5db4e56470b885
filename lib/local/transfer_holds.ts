/**
 * The blocks KV transfers hold on one worker: reservations an incoming transfer writes into
 * (invisible to lookups until published, so routing never sees half-received K/V) and pins on the
 * published blocks an outgoing transfer reads (so reclamation cannot free them mid-copy).
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import { type BlockPool, BlockState, blockStateName } from "./block_pool.ts";
import type { PrefixCache } from "./prefix_cache.ts";

/** A published block announced by an incoming transfer. */
export interface PublishedBlock {
  block: number;
  hash: BlockHash;
  parent: BlockHash;
  /**
   * Moved here from a rank that had to make room: it starts with no access, so this rank's
   * reclamation takes it before any block its own requests used. Keeping it then only ever costs
   * room nothing else here wanted (a move that came with a fresh entry's recency made this rank
   * evict its own warmer cache instead).
   */
  moved?: boolean;
}

/** A source block an outgoing transfer reads, as the control plane knows it. */
export interface BlockRef {
  block: number;
  generation: number;
}

/** Reservations for incoming transfers and pins for outgoing ones, over a pool and its prefix cache. */
export class TransferHolds {
  readonly #pool: BlockPool;
  readonly #cache: PrefixCache;
  readonly #now: () => number;
  #numReserved = 0;

  /** Holds over `pool` and `cache`; `now` (ms) stamps the blocks a transfer publishes. */
  constructor(pool: BlockPool, cache: PrefixCache, now: () => number) {
    this.#pool = pool;
    this.#cache = cache;
    this.#now = now;
  }

  /** Blocks reserved for incoming transfers and not yet published or released. */
  get numReserved(): number {
    return this.#numReserved;
  }

  /**
   * Reserves `n` blocks for an incoming transfer (invisible to lookups), reclaiming unreferenced
   * cached blocks in the usual order (leaves, LFU then LRU) when too few are free; null when they do
   * not fit. Live and pinned blocks are never taken.
   */
  reserve(n: number): number[] | null {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`reserve count must be a non-negative integer, got ${n}`);
    if (!this.#cache.ensureFree(n)) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.#pool.take(BlockState.Reserved));
    this.#numReserved += n;
    return out;
  }

  /**
   * Publishes received blocks: they become Ready, unreferenced prefix-cache entries. A hash already
   * cached here makes the received copy redundant: it is freed. Returns the blocks now published.
   */
  publishReserved(entries: readonly PublishedBlock[]): number[] {
    // Check all first so a bad entry changes nothing.
    for (const e of entries) this.#expectState(e.block, BlockState.Reserved, "publish");
    const now = this.#now();
    const out: number[] = [];
    for (const e of entries) {
      this.#numReserved--;
      this.#pool.state[e.block] = BlockState.Ready;
      if (this.#cache.register(e.block, e.hash, e.parent, now, e.moved ? 0 : 1)) {
        this.#cache.becameUnreferenced(e.block);
        out.push(e.block);
      } else {
        this.#pool.release(e.block);
      }
    }
    return out;
  }

  /** Returns reserved blocks to the free list (transfer aborted). */
  releaseReserved(blocks: readonly number[]): void {
    for (const b of blocks) this.#expectState(b, BlockState.Reserved, "release a reservation of");
    for (const b of blocks) {
      this.#numReserved--;
      this.#pool.release(b);
    }
  }

  /**
   * Pins published source blocks for an outgoing transfer if every one is still the use the caller
   * saw (Ready, published, same generation). All or nothing; false when any is stale.
   */
  pinSource(refs: readonly BlockRef[]): boolean {
    for (const r of refs) {
      this.#pool.checkId(r.block);
      if (this.#cache.hashOf(r.block) === null || this.#pool.generation[r.block] !== r.generation) return false;
    }
    for (const r of refs) this.#cache.pin(r.block);
    return true;
  }

  /**
   * Pins the cached blocks of those `hashes` published here: the parents an incoming chain hangs
   * from, so the reclamation a reservation may run cannot orphan the chain. Returns the pinned ids
   * (for unpin once the chain is published, making them inner blocks, or aborted).
   */
  pinCached(hashes: Iterable<BlockHash>): number[] {
    const out: number[] = [];
    for (const h of new Set(hashes)) {
      const b = this.#cache.blockOf(h);
      if (b === undefined) continue;
      this.#cache.pin(b);
      out.push(b);
    }
    return out;
  }

  /** Releases pins taken by pinSource or pinCached; all or nothing. */
  unpin(blocks: readonly number[]): void {
    for (const b of blocks) {
      this.#pool.checkId(b);
      if (this.#pool.pinCount[b] === 0) throw new RangeError(`block ${b} is not pinned`);
    }
    for (const b of blocks) this.#cache.unpin(b);
  }

  #expectState(b: number, state: number, action: string): void {
    this.#pool.checkId(b);
    if (this.#pool.state[b] !== state) {
      throw new RangeError(
        `cannot ${action} block ${b}: it is ${blockStateName(this.#pool.state[b]!)}, expected ${blockStateName(state)}`,
      );
    }
  }
}
