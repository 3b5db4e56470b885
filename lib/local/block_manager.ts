/**
 * The local block manager of one KV cache, shaped like vLLM v1's KV cache manager: it looks up
 * prefix hits, allocates a sequence's blocks, commits them once computed and frees them, and it
 * composes the pieces that own the rest: the BlockPool (physical blocks and the free list), the
 * PrefixCache (hash -> block map, chain child counts, reclamation order), TransferHolds (transfer
 * reservations and pins) and the BlockPublisher (versioned reports for the control plane).
 *
 * A block a sequence fills moves Free -> Writing, and becomes Ready (and, with prefix caching,
 * findable by its hash) only after the step that completes its K/V: `commitComputed` runs after
 * each step. At zero references a Ready, hashed block stays as a reclaimable prefix-cache entry; a
 * hit revives it, reclamation frees it. Reclamation takes leaves only (a block none of whose
 * children is cached), least frequently then least recently used.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockDelta, BlockSnapshot, RankCapacity, RankLoad } from "../core/block_snapshot.ts";
import type { Sequence } from "../core/sequence.ts";
import { BlockPool, BlockState, blockStateName } from "./block_pool.ts";
import { BlockPublisher, type PublishedBlocks } from "./block_publisher.ts";
import { checkBlockInvariants, type InvariantOptions } from "./block_invariants.ts";
import { PrefixCache } from "./prefix_cache.ts";
import { type BlockRef, type PublishedBlock, TransferHolds } from "./transfer_holds.ts";

/** Configuration of a block manager. */
export interface BlockManagerOptions {
  numBlocks: number;
  blockSize: number;
  /** Share complete blocks across requests by hash (default true). */
  enablePrefixCaching?: boolean;
  /** Worker rank reported in snapshots (default 0). */
  rank?: number;
  /** Changes on every worker start; snapshots carry it (default: wall-clock ms). */
  epoch?: number;
  /**
   * Monotonic clock in ms for recency (default: the host clock, performance.timeOrigin +
   * performance.now(), so the lastAccess of different workers of one host compare).
   */
  now?: () => number;
}

/** Facts about one physical block (tests, debugging). */
export interface BlockInfo {
  state: string;
  generation: number;
  refCount: number;
  pinCount: number;
  hash: BlockHash | null;
  accessCount: number;
}

/** Allocation, prefix cache and reclamation for one KV cache. */
export class BlockManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  /** The physical blocks and the free list. */
  readonly pool: BlockPool;
  /** Prompt tokens looked up at admission, and those served from the cache. */
  prefixQueryTokens = 0;
  prefixHitTokens = 0;

  readonly #now: () => number;
  readonly #publisher: BlockPublisher;
  readonly #cache: PrefixCache;
  readonly #holds: TransferHolds;
  /** What the publisher reads when it reports. */
  readonly #published: PublishedBlocks;

  constructor(o: BlockManagerOptions) {
    if (!Number.isInteger(o.blockSize) || o.blockSize <= 0) {
      throw new RangeError(`blockSize must be a positive integer, got ${o.blockSize}`);
    }
    this.pool = new BlockPool(o.numBlocks);
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.enablePrefixCaching = o.enablePrefixCaching ?? true;
    this.#now = o.now ?? (() => performance.timeOrigin + performance.now());
    this.#publisher = new BlockPublisher(o.rank ?? 0, o.epoch ?? Date.now());
    this.#cache = new PrefixCache(this.pool, this.#publisher, this.#now, this.enablePrefixCaching);
    this.#holds = new TransferHolds(this.pool, this.#cache, this.#now);
    this.#published = {
      entry: (b) => this.#cache.entry(b),
      entries: () => this.#cache.entries(),
      capacity: () => this.capacity(),
    };
  }

  get numFreeBlocks(): number {
    return this.pool.numFree;
  }

  /** Unreferenced, unpinned prefix-cache entries (free-able by reclamation). */
  get numReclaimableBlocks(): number {
    return this.#cache.numReclaimable;
  }

  get numReservedBlocks(): number {
    return this.#holds.numReserved;
  }

  /** Blocks held by sequences or pins (not free, not reclaimable, not reserved). */
  get numLiveBlocks(): number {
    return this.numBlocks - this.pool.numFree - this.#cache.numReclaimable - this.#holds.numReserved;
  }

  /** Blocks an allocation could obtain now (free plus reclaimable). */
  get numAvailableBlocks(): number {
    return this.pool.numFree + this.#cache.numReclaimable;
  }

  /** Blocks needed to hold `numTokens` tokens. */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  // ---- sequences ---------------------------------------------------------------------------

  /**
   * Leading blocks of the sequence a cache hit may cover: complete blocks short of its last token
   * (whose logits are needed), none when prefix caching is off or it asks for prompt logprobs.
   */
  cacheableBlocks(seq: Sequence): number {
    if (!this.enablePrefixCaching || seq.params.promptLogprobs !== undefined) return 0;
    return Math.min(Math.floor((seq.numTokens - 1) / this.blockSize), seq.blockHashes.length);
  }

  /**
   * Ready cached blocks matching the sequence's leading complete blocks. At least the last token is
   * left to compute, since its logits are needed. A sequence asking for prompt logprobs reads no
   * cached block (vLLM's skip_reading_prefix_cache): its every prompt position must be computed.
   */
  lookupPrefix(seq: Sequence): number[] {
    const max = this.cacheableBlocks(seq);
    const out: number[] = [];
    for (let i = 0; i < max; i++) {
      const b = this.#cache.blockOf(seq.blockHashes[i]!);
      if (b === undefined) break;
      out.push(b);
    }
    return out;
  }

  /**
   * Makes room for `numNewTokens` more tokens of `seq`. On admission (empty block table) the
   * sequence adopts `cachedBlocks` (from lookupPrefix) first. Returns false, changing nothing the
   * sequence holds, when the cache cannot supply the blocks.
   */
  allocateSlots(seq: Sequence, numNewTokens: number, cachedBlocks: readonly number[] = []): boolean {
    const admitting = seq.blockTable.length === 0;
    if (!admitting && cachedBlocks.length > 0) {
      throw new Error(`request ${seq.requestId}: cached blocks passed to a sequence that already holds blocks`);
    }
    const computed = admitting ? cachedBlocks.length * this.blockSize : seq.numComputedTokens;
    const held = admitting ? cachedBlocks.length : seq.blockTable.length;
    const need = Math.max(0, this.blocksFor(computed + numNewTokens) - held);
    // Pin the hits first so reclamation for the new blocks cannot take them.
    for (const b of cachedBlocks) this.#cache.acquire(b);
    if (!this.#cache.ensureFree(need)) {
      for (const b of cachedBlocks) this.#cache.release(b);
      return false;
    }
    if (admitting) {
      const now = this.#now();
      for (const b of cachedBlocks) this.#cache.touch(b, now, true);
      seq.blockTable = [...cachedBlocks];
      seq.numReadyBlocks = cachedBlocks.length;
      seq.numComputedTokens = seq.numCachedTokens = computed;
      this.prefixQueryTokens += seq.numTokens;
      this.prefixHitTokens += computed;
    }
    for (let i = 0; i < need; i++) {
      const b = this.pool.take(BlockState.Writing);
      this.pool.refCount[b] = 1;
      seq.blockTable.push(b);
    }
    return true;
  }

  /**
   * Publishes the sequence's blocks whose K/V became complete (call after the step that computed
   * them, once seq.numComputedTokens includes them).
   */
  commitComputed(seq: Sequence): void {
    const full = Math.min(
      Math.floor(seq.numComputedTokens / this.blockSize),
      seq.blockHashes.length,
      seq.blockTable.length,
    );
    const now = this.#now();
    for (let i = seq.numReadyBlocks; i < full; i++) {
      const b = seq.blockTable[i]!;
      if (this.pool.state[b] !== BlockState.Writing) continue;
      this.pool.state[b] = BlockState.Ready;
      // A duplicate (another block already published this hash) stays private and is freed on release.
      this.#cache.register(b, seq.blockHashes[i]!, i === 0 ? seq.rootHash : seq.blockHashes[i - 1]!, now);
    }
    if (full > seq.numReadyBlocks) seq.numReadyBlocks = full;
  }

  /** Drops the sequence's references (tail first); cached blocks stay as reclaimable entries. */
  free(seq: Sequence): void {
    for (let i = seq.blockTable.length - 1; i >= 0; i--) this.#cache.release(seq.blockTable[i]!);
    seq.blockTable = [];
    seq.numReadyBlocks = 0;
  }

  // ---- transfers (delegated to TransferHolds and the PrefixCache) ----------------------------

  /** See TransferHolds.reserve: `n` blocks for an incoming transfer, or null when they do not fit. */
  reserve(n: number): number[] | null {
    return this.#holds.reserve(n);
  }

  /** See TransferHolds.publishReserved: received blocks become cache entries; returns those published. */
  publishReserved(entries: readonly PublishedBlock[]): number[] {
    return this.#holds.publishReserved(entries);
  }

  /** Returns reserved blocks to the free list (transfer aborted). */
  releaseReserved(blocks: readonly number[]): void {
    this.#holds.releaseReserved(blocks);
  }

  /** See TransferHolds.pinSource: pins an outgoing transfer's sources, all or nothing; false when stale. */
  pinSource(refs: readonly BlockRef[]): boolean {
    return this.#holds.pinSource(refs);
  }

  /** See TransferHolds.pinCached: pins the parents an incoming chain hangs from; returns the pinned ids. */
  pinCached(hashes: Iterable<BlockHash>): number[] {
    return this.#holds.pinCached(hashes);
  }

  /** Releases pins taken by pinSource or pinCached. */
  unpinSource(blocks: readonly number[]): void {
    this.#holds.unpin(blocks);
  }

  /** Move finalization: see PrefixCache.reclaimSuffix (frees the chain's unreferenced tail leaves). */
  reclaimSuffix(blocks: readonly number[]): number[] {
    return this.#cache.reclaimSuffix(blocks);
  }

  // ---- reports -------------------------------------------------------------------------------

  get epoch(): number {
    return this.#publisher.epoch;
  }

  /** Version of the latest snapshot or delta. */
  get version(): number {
    return this.#publisher.version;
  }

  capacity(): RankCapacity {
    return {
      numBlocks: this.numBlocks,
      blockSize: this.blockSize,
      numFree: this.pool.numFree,
      numReclaimable: this.#cache.numReclaimable,
    };
  }

  /** Full published state (a new version). */
  snapshot(load: RankLoad): BlockSnapshot {
    return this.#publisher.snapshot(this.#published, load);
  }

  /** Changes since the last snapshot or delta (a new version), or null when nothing changed. */
  takeDelta(load: RankLoad): BlockDelta | null {
    return this.#publisher.delta(this.#published, load);
  }

  /** Facts about one block. */
  blockInfo(b: number): BlockInfo {
    this.pool.checkId(b);
    return {
      state: blockStateName(this.pool.state[b]!),
      generation: this.pool.generation[b]!,
      refCount: this.pool.refCount[b]!,
      pinCount: this.pool.pinCount[b]!,
      hash: this.#cache.hashOf(b),
      accessCount: this.#cache.accessCount(b),
    };
  }

  /** The registered block of a hash, if cached here. */
  cachedBlockOf(hash: BlockHash): number | undefined {
    return this.#cache.blockOf(hash);
  }

  /** Throws an Error naming the first violated invariant (see block_invariants.ts). */
  checkInvariants(options: InvariantOptions = {}): void {
    checkBlockInvariants({ pool: this.pool, ...this.#cache.state(), numReserved: this.#holds.numReserved }, options);
  }
}
