/**
 * Versioned reports of a block manager's published state for the control plane: full snapshots
 * and deltas. Tracks which published blocks were added, removed or touched since the last report.
 * A consumer applies a delta's `removed` before its `added` (a block id can leave and come back
 * with a new generation and hash within one delta).
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockDelta, BlockEntry, BlockSnapshot, RankCapacity, RankLoad } from "../core/block_snapshot.ts";

/** What the publisher reads from the block manager when it reports. */
export interface PublishedBlocks {
  /** Current entry of a published (registered) block. */
  entry(block: number): BlockEntry;
  /** Every published block. */
  entries(): BlockEntry[];
  capacity(): RankCapacity;
}

/** Records changes and produces snapshots/deltas with a monotonic version per epoch. */
export class BlockPublisher {
  readonly rank: number;
  readonly epoch: number;
  #version = 0;
  /** Registered since the last report (not yet seen by the consumer). */
  readonly #added = new Set<number>();
  /** Seen by the consumer, unregistered since. */
  readonly #removed = new Map<number, { hash: BlockHash; block: number; generation: number }>();
  readonly #touched = new Set<number>();
  #lastLoad: RankLoad | undefined;
  #lastCapacity: RankCapacity | undefined;

  constructor(rank: number, epoch: number) {
    this.rank = rank;
    this.epoch = epoch;
  }

  /** Version of the latest report (0 before the first). */
  get version(): number {
    return this.#version;
  }

  /** True when a block change is waiting to be reported. */
  get dirty(): boolean {
    return this.#added.size + this.#removed.size + this.#touched.size > 0;
  }

  markAdded(block: number): void {
    this.#added.add(block);
  }

  markRemoved(block: number, hash: BlockHash, generation: number): void {
    this.#touched.delete(block);
    // Never reported: the consumer need not hear of it at all.
    if (this.#added.delete(block)) return;
    this.#removed.set(block, { hash, block, generation });
  }

  markTouched(block: number): void {
    if (!this.#added.has(block)) this.#touched.add(block);
  }

  /** A full snapshot; it supersedes every pending change. */
  snapshot(src: PublishedBlocks, load: RankLoad): BlockSnapshot {
    this.#clear();
    const capacity = src.capacity();
    this.#remember(capacity, load);
    return {
      rank: this.rank,
      epoch: this.epoch,
      version: ++this.#version,
      capacity,
      load: { ...load },
      entries: src.entries(),
    };
  }

  /** Changes since the last report, or null when neither blocks, capacity nor load changed. */
  delta(src: PublishedBlocks, load: RankLoad): BlockDelta | null {
    const capacity = src.capacity();
    const same = sameCounters(capacity, this.#lastCapacity) && sameCounters(load, this.#lastLoad);
    if (!this.dirty && same) return null;
    const d: BlockDelta = {
      rank: this.rank,
      epoch: this.epoch,
      baseVersion: this.#version,
      version: ++this.#version,
      capacity,
      load: { ...load },
      added: [...this.#added].map((b) => src.entry(b)),
      removed: [...this.#removed.values()],
      touched: [...this.#touched].map((b) => {
        const e = src.entry(b);
        return { hash: e.hash, block: b, refCount: e.refCount, lastAccess: e.lastAccess, accessCount: e.accessCount };
      }),
    };
    this.#clear();
    this.#remember(capacity, load);
    return d;
  }

  #clear(): void {
    this.#added.clear();
    this.#removed.clear();
    this.#touched.clear();
  }

  #remember(capacity: RankCapacity, load: RankLoad): void {
    this.#lastCapacity = { ...capacity };
    this.#lastLoad = { ...load };
  }
}

/** True when `b` exists and has every counter of `a` at the same value. */
function sameCounters<T extends RankCapacity | RankLoad>(a: T, b: T | undefined): boolean {
  if (!b) return false;
  for (const k in a) if (a[k] !== b[k]) return false;
  return true;
}
