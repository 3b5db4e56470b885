/**
 * The local block manager of one KV cache: allocation, reference counts, readiness, the prefix
 * cache over chained block hashes, dependency-safe reclamation, transfer reservations and pins, and
 * versioned reports for the control plane.
 *
 * A block a sequence fills moves Free -> Writing, and becomes Ready (and, with prefix caching,
 * findable by its hash) only after the step that completes its K/V: `commitComputed` runs after
 * each step. At zero references a Ready, hashed block stays as a reclaimable prefix-cache entry; a
 * hit revives it, reclamation frees it. Reclamation takes leaves only (a block none of whose
 * children is cached), least frequently then least recently used.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockDelta, BlockEntry, BlockSnapshot, RankCapacity, RankLoad } from "../core/block_snapshot.ts";
import type { Sequence } from "../core/sequence.ts";
import { BlockPool, BlockState, blockStateName } from "./block_pool.ts";
import { BlockPublisher } from "./block_publisher.ts";
import { checkBlockInvariants, type InvariantOptions } from "./block_invariants.ts";
import { type ReclaimCandidate, ReclaimOrder } from "./reclaim_order.ts";

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

/** A published block announced by an incoming transfer. */
export interface PublishedBlock {
  block: number;
  hash: BlockHash;
  parent: BlockHash;
}

/** A source block an outgoing transfer reads, as the control plane knows it. */
export interface BlockRef {
  block: number;
  generation: number;
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
  readonly pool: BlockPool;
  /** Prompt tokens looked up at admission, and those served from the cache. */
  prefixQueryTokens = 0;
  prefixHitTokens = 0;

  readonly #now: () => number;
  readonly #publisher: BlockPublisher;
  /** hash -> its registered (published, Ready) block. */
  readonly #cached = new Map<BlockHash, number>();
  /** Hash of each registered block (null: unregistered). */
  readonly #hashOf: (BlockHash | null)[];
  readonly #parentOf: BlockHash[];
  /** parent hash -> number of registered blocks chained to it. */
  readonly #children = new Map<BlockHash, number>();
  readonly #accessCount: Float64Array;
  readonly #lastAccess: Float64Array;
  readonly #tick: Float64Array;
  #clock = 0;
  /** Registered blocks with no references and no pins. */
  #numReclaimable = 0;
  #numReserved = 0;
  readonly #reclaimOrder = new ReclaimOrder();

  constructor(o: BlockManagerOptions) {
    if (!Number.isInteger(o.blockSize) || o.blockSize <= 0) throw new RangeError(`blockSize must be a positive integer, got ${o.blockSize}`);
    this.pool = new BlockPool(o.numBlocks);
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.enablePrefixCaching = o.enablePrefixCaching ?? true;
    this.#now = o.now ?? (() => performance.timeOrigin + performance.now());
    this.#publisher = new BlockPublisher(o.rank ?? 0, o.epoch ?? Date.now());
    this.#hashOf = new Array<BlockHash | null>(o.numBlocks).fill(null);
    this.#parentOf = new Array<BlockHash>(o.numBlocks).fill("");
    this.#accessCount = new Float64Array(o.numBlocks);
    this.#lastAccess = new Float64Array(o.numBlocks);
    this.#tick = new Float64Array(o.numBlocks);
  }

  get numFreeBlocks(): number {
    return this.pool.numFree;
  }

  /** Unreferenced, unpinned prefix-cache entries (free-able by reclamation). */
  get numReclaimableBlocks(): number {
    return this.#numReclaimable;
  }

  get numReservedBlocks(): number {
    return this.#numReserved;
  }

  /** Blocks held by sequences or pins (not free, not reclaimable, not reserved). */
  get numLiveBlocks(): number {
    return this.numBlocks - this.pool.numFree - this.#numReclaimable - this.#numReserved;
  }

  /** Blocks an allocation could obtain now (free plus reclaimable). */
  get numAvailableBlocks(): number {
    return this.pool.numFree + this.#numReclaimable;
  }

  /** Blocks needed to hold `numTokens` tokens. */
  blocksFor(numTokens: number): number {
    return Math.ceil(numTokens / this.blockSize);
  }

  // ---- sequences ---------------------------------------------------------------------------

  /**
   * Ready cached blocks matching the sequence's leading complete blocks. At least the last token is
   * left to compute, since its logits are needed.
   */
  lookupPrefix(seq: Sequence): number[] {
    if (!this.enablePrefixCaching) return [];
    const max = Math.min(Math.floor((seq.numTokens - 1) / this.blockSize), seq.blockHashes.length);
    const out: number[] = [];
    for (let i = 0; i < max; i++) {
      const b = this.#cached.get(seq.blockHashes[i]!);
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
    if (!admitting && cachedBlocks.length > 0) throw new Error(`request ${seq.requestId}: cached blocks passed to a sequence that already holds blocks`);
    const computed = admitting ? cachedBlocks.length * this.blockSize : seq.numComputedTokens;
    const held = admitting ? cachedBlocks.length : seq.blockTable.length;
    const need = Math.max(0, this.blocksFor(computed + numNewTokens) - held);
    // Pin the hits first so reclamation for the new blocks cannot take them.
    for (const b of cachedBlocks) this.#acquire(b);
    if (!this.#ensureFree(need)) {
      for (const b of cachedBlocks) this.#releaseRef(b);
      return false;
    }
    if (admitting) {
      const now = this.#now();
      for (const b of cachedBlocks) this.#touch(b, now, true);
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
    const full = Math.min(Math.floor(seq.numComputedTokens / this.blockSize), seq.blockHashes.length, seq.blockTable.length);
    const now = this.#now();
    for (let i = seq.numReadyBlocks; i < full; i++) {
      const b = seq.blockTable[i]!;
      if (this.pool.state[b] !== BlockState.Writing) continue;
      this.pool.state[b] = BlockState.Ready;
      const hash = seq.blockHashes[i]!;
      // A duplicate (another block already published this hash) stays private and is freed on release.
      if (this.enablePrefixCaching && !this.#cached.has(hash)) {
        this.#register(b, hash, i === 0 ? seq.rootHash : seq.blockHashes[i - 1]!, now);
      }
    }
    if (full > seq.numReadyBlocks) seq.numReadyBlocks = full;
  }

  /** Drops the sequence's references (tail first); cached blocks stay as reclaimable entries. */
  free(seq: Sequence): void {
    for (let i = seq.blockTable.length - 1; i >= 0; i--) this.#releaseRef(seq.blockTable[i]!);
    seq.blockTable = [];
    seq.numReadyBlocks = 0;
  }

  // ---- transfers (issue 6) -------------------------------------------------------------------

  /**
   * Reserves `n` blocks for an incoming transfer (invisible to lookups), reclaiming unreferenced
   * cached blocks in the usual order (leaves, LFU then LRU) when too few are free; null when they do
   * not fit. Live and pinned blocks are never taken.
   */
  reserve(n: number): number[] | null {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`reserve count must be a non-negative integer, got ${n}`);
    if (!this.#ensureFree(n)) return null;
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.pool.take(BlockState.Reserved));
    this.#numReserved += n;
    return out;
  }

  /**
   * Publishes received blocks: they become Ready, unreferenced prefix-cache entries. A hash already
   * cached here makes the received copy redundant: it is freed. Returns the blocks now published.
   */
  publishReserved(entries: readonly PublishedBlock[]): number[] {
    for (const e of entries) this.#expectState(e.block, BlockState.Reserved, "publish");
    const now = this.#now();
    const out: number[] = [];
    for (const e of entries) {
      this.#numReserved--;
      this.pool.state[e.block] = BlockState.Ready;
      if (this.enablePrefixCaching && !this.#cached.has(e.hash)) {
        this.#register(e.block, e.hash, e.parent, now);
        this.#becameUnreferenced(e.block);
        out.push(e.block);
      } else {
        this.pool.release(e.block);
      }
    }
    return out;
  }

  /** Returns reserved blocks to the free list (transfer aborted). */
  releaseReserved(blocks: readonly number[]): void {
    for (const b of blocks) this.#expectState(b, BlockState.Reserved, "release a reservation of");
    for (const b of blocks) {
      this.#numReserved--;
      this.pool.release(b);
    }
  }

  /**
   * Pins published source blocks for an outgoing transfer if every one is still the use the caller
   * saw (Ready, published, same generation). All or nothing; false when any is stale.
   */
  pinSource(refs: readonly BlockRef[]): boolean {
    for (const r of refs) {
      this.pool.checkId(r.block);
      if (this.#hashOf[r.block] === null || this.pool.generation[r.block] !== r.generation) return false;
    }
    for (const r of refs) this.#pin(r.block);
    return true;
  }

  /**
   * Pins the cached blocks of those `hashes` published here: the parents an incoming chain hangs
   * from, so the reclamation a reservation may run cannot orphan the chain. Returns the pinned ids
   * (for unpinSource once the chain is published, making them inner blocks, or aborted).
   */
  pinCached(hashes: Iterable<BlockHash>): number[] {
    const out: number[] = [];
    for (const h of new Set(hashes)) {
      const b = this.#cached.get(h);
      if (b === undefined) continue;
      this.#pin(b);
      out.push(b);
    }
    return out;
  }

  /** Releases pins taken by pinSource or pinCached. */
  unpinSource(blocks: readonly number[]): void {
    for (const b of blocks) {
      this.pool.checkId(b);
      if (this.pool.pinCount[b] === 0) throw new RangeError(`block ${b} is not pinned`);
    }
    for (const b of blocks) {
      this.pool.pinCount[b]!--;
      if (this.pool.pinCount[b] === 0 && this.pool.refCount[b] === 0) this.#becameUnreferenced(b);
    }
  }

  /**
   * Move finalization: frees the given chain's blocks from its tail while each is an unreferenced,
   * unpinned leaf; stops at the first that is not. Returns the blocks freed.
   */
  reclaimSuffix(blocks: readonly number[]): number[] {
    const out: number[] = [];
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i]!;
      this.pool.checkId(b);
      if (!this.#isReclaimableLeaf(b)) break;
      this.#reclaim(b);
      out.push(b);
    }
    return out;
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
    return { numBlocks: this.numBlocks, blockSize: this.blockSize, numFree: this.pool.numFree, numReclaimable: this.#numReclaimable };
  }

  /** Full published state (a new version). */
  snapshot(load: RankLoad): BlockSnapshot {
    return this.#publisher.snapshot(this.#published(), load);
  }

  /** Changes since the last snapshot or delta (a new version), or null when nothing changed. */
  takeDelta(load: RankLoad): BlockDelta | null {
    return this.#publisher.delta(this.#published(), load);
  }

  /** Facts about one block. */
  blockInfo(b: number): BlockInfo {
    this.pool.checkId(b);
    return {
      state: blockStateName(this.pool.state[b]!),
      generation: this.pool.generation[b]!,
      refCount: this.pool.refCount[b]!,
      pinCount: this.pool.pinCount[b]!,
      hash: this.#hashOf[b]!,
      accessCount: this.#accessCount[b]!,
    };
  }

  /** The registered block of a hash, if cached here. */
  cachedBlockOf(hash: BlockHash): number | undefined {
    return this.#cached.get(hash);
  }

  /** Throws an Error naming the first violated invariant (see block_invariants.ts). */
  checkInvariants(options: InvariantOptions = {}): void {
    checkBlockInvariants(
      {
        pool: this.pool,
        cached: this.#cached,
        hashOf: this.#hashOf,
        parentOf: this.#parentOf,
        children: this.#children,
        numReclaimable: this.#numReclaimable,
        numReserved: this.#numReserved,
      },
      options,
    );
  }

  // ---- internals ---------------------------------------------------------------------------

  #published() {
    return {
      entry: (b: number) => this.#entry(b),
      entries: () => [...this.#cached.values()].map((b) => this.#entry(b)),
      capacity: () => this.capacity(),
    };
  }

  #entry(b: number): BlockEntry {
    return {
      hash: this.#hashOf[b]!,
      parent: this.#parentOf[b]!,
      block: b,
      generation: this.pool.generation[b]!,
      refCount: this.pool.refCount[b]!,
      lastAccess: this.#lastAccess[b]!,
      accessCount: this.#accessCount[b]!,
    };
  }

  #register(b: number, hash: BlockHash, parent: BlockHash, now: number): void {
    this.#cached.set(hash, b);
    this.#hashOf[b] = hash;
    this.#parentOf[b] = parent;
    this.#children.set(parent, (this.#children.get(parent) ?? 0) + 1);
    this.#accessCount[b] = 1;
    this.#lastAccess[b] = now;
    this.#tick[b] = ++this.#clock;
    this.#publisher.markAdded(b);
  }

  /** Adds a transfer pin to a published block: it is no longer reclaimable. */
  #pin(b: number): void {
    if (this.pool.refCount[b] === 0 && this.pool.pinCount[b] === 0) this.#numReclaimable--;
    this.pool.pinCount[b]!++;
  }

  /** Adds a sequence reference to a cached block (a prefix hit). */
  #acquire(b: number): void {
    if (this.pool.refCount[b] === 0 && this.pool.pinCount[b] === 0 && this.#hashOf[b] !== null) this.#numReclaimable--;
    this.pool.refCount[b]!++;
  }

  #touch(b: number, now: number, access: boolean): void {
    if (access) this.#accessCount[b]!++;
    this.#lastAccess[b] = now;
    this.#tick[b] = ++this.#clock;
    this.#publisher.markTouched(b);
  }

  #releaseRef(b: number): void {
    if (this.pool.refCount[b]! <= 0) throw new Error(`block ${b} released with refCount=${this.pool.refCount[b]}`);
    this.pool.refCount[b]!--;
    if (this.#hashOf[b] === null) {
      if (this.pool.refCount[b] === 0 && this.pool.pinCount[b] === 0) this.pool.release(b);
      return;
    }
    this.#touch(b, this.#now(), false);
    if (this.pool.refCount[b] === 0 && this.pool.pinCount[b] === 0) this.#becameUnreferenced(b);
  }

  /** A registered block just lost its last reference or pin. */
  #becameUnreferenced(b: number): void {
    this.#numReclaimable++;
    this.#offerForReclaim(b);
  }

  #offerForReclaim(b: number): void {
    if (!this.#isReclaimableLeaf(b)) return;
    this.#reclaimOrder.push({ block: b, generation: this.pool.generation[b]!, accessCount: this.#accessCount[b]!, tick: this.#tick[b]! });
  }

  #isReclaimableLeaf(b: number): boolean {
    const h = this.#hashOf[b];
    return h != null && this.pool.refCount[b] === 0 && this.pool.pinCount[b] === 0 && !this.#children.has(h);
  }

  #isCurrent = (c: ReclaimCandidate): boolean =>
    this.pool.generation[c.block] === c.generation && this.#tick[c.block] === c.tick && this.#isReclaimableLeaf(c.block);

  /** Frees blocks by reclamation until `n` are free; false (reclaiming nothing) when impossible. */
  #ensureFree(n: number): boolean {
    if (this.pool.numFree >= n) return true;
    if (this.pool.numFree + this.#numReclaimable < n) return false;
    while (this.pool.numFree < n) {
      const c = this.#reclaimOrder.pop(this.#isCurrent);
      // Only non-leaves whose cached children are live remain: they cannot be freed yet.
      if (c === undefined) return false;
      this.#reclaim(c.block);
    }
    this.#reclaimOrder.compact(this.#isCurrent, 4 * this.numBlocks);
    return true;
  }

  /** Unpublishes and frees an unreferenced leaf; its parent may become a leaf. */
  #reclaim(b: number): void {
    const hash = this.#hashOf[b]!;
    const parent = this.#parentOf[b]!;
    this.#cached.delete(hash);
    this.#hashOf[b] = null;
    this.#publisher.markRemoved(b, hash, this.pool.generation[b]!);
    const left = (this.#children.get(parent) ?? 1) - 1;
    if (left > 0) this.#children.set(parent, left);
    else this.#children.delete(parent);
    this.#numReclaimable--;
    this.pool.release(b);
    const p = this.#cached.get(parent);
    if (left === 0 && p !== undefined) this.#offerForReclaim(p);
  }

  #expectState(b: number, state: number, action: string): void {
    this.pool.checkId(b);
    if (this.pool.state[b] !== state) {
      throw new RangeError(`cannot ${action} block ${b}: it is ${blockStateName(this.pool.state[b]!)}, expected ${blockStateName(state)}`);
    }
  }
}
