/**
 * The published block metadata of one worker rank as the control plane holds it: entries by hash,
 * child counts (parent dependencies), capacity, load, epoch and snapshot version.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockDelta, BlockEntry, BlockSnapshot, RankCapacity, RankLoad } from "../core/block_snapshot.ts";

/** One rank's page-table slice. Mutated only by the GlobalBlockManager after validation. */
export class RankTable {
  readonly rank: number;
  epoch: number;
  version: number;
  capacity: RankCapacity;
  load: RankLoad;
  /** Published (Ready) blocks by hash. */
  readonly entries = new Map<BlockHash, BlockEntry>();
  /** Published children per parent hash on this rank (a block with none is a leaf). */
  readonly childCount = new Map<BlockHash, number>();
  /** Published blocks no published block names as parent, kept as entries come and go. */
  readonly leaves = new Set<BlockHash>();

  constructor(snapshot: BlockSnapshot) {
    this.rank = snapshot.rank;
    this.epoch = snapshot.epoch;
    this.version = snapshot.version;
    this.capacity = { ...snapshot.capacity };
    this.load = { ...snapshot.load };
    for (const e of snapshot.entries) this.#add(e);
  }

  /** Number of published blocks. */
  get size(): number {
    return this.entries.size;
  }

  /** True when no published block on this rank names `hash` as its parent. */
  isLeaf(hash: BlockHash): boolean {
    return !this.childCount.has(hash);
  }

  /**
   * Checks that `delta` fits this table (removed blocks exist with that block id and generation,
   * added hashes are new, touched hashes exist afterwards). Returns the problem, or undefined.
   */
  deltaProblem(delta: BlockDelta): string | undefined {
    const removed = new Set<BlockHash>();
    for (const r of delta.removed) {
      const e = this.entries.get(r.hash);
      if (!e) return `removed block ${r.hash} is not published on rank ${this.rank}`;
      if (e.block !== r.block || e.generation !== r.generation) {
        return `removed block ${r.hash} is block ${r.block} gen ${r.generation}, the table has block ${e.block} gen ${e.generation}`;
      }
      if (removed.has(r.hash)) return `block ${r.hash} removed twice`;
      removed.add(r.hash);
    }
    const added = new Set<BlockHash>();
    for (const a of delta.added) {
      if ((this.entries.has(a.hash) && !removed.has(a.hash)) || added.has(a.hash)) {
        return `added block ${a.hash} is already published on rank ${this.rank}`;
      }
      added.add(a.hash);
    }
    for (const t of delta.touched) {
      const present = added.has(t.hash) || (this.entries.has(t.hash) && !removed.has(t.hash));
      if (!present) return `touched block ${t.hash} is not published on rank ${this.rank}`;
    }
    return undefined;
  }

  /** Applies a delta that {@link deltaProblem} accepted. */
  applyDelta(delta: BlockDelta): void {
    for (const r of delta.removed) this.#remove(r.hash);
    for (const a of delta.added) this.#add(a);
    for (const t of delta.touched) {
      const e = this.entries.get(t.hash)!;
      e.refCount = t.refCount;
      e.lastAccess = t.lastAccess;
      e.accessCount = t.accessCount;
    }
    this.version = delta.version;
    this.capacity = { ...delta.capacity };
    this.load = { ...delta.load };
  }

  #add(e: BlockEntry): void {
    this.entries.set(e.hash, { ...e });
    this.childCount.set(e.parent, (this.childCount.get(e.parent) ?? 0) + 1);
    this.leaves.delete(e.parent);
    if (!this.childCount.has(e.hash)) this.leaves.add(e.hash);
  }

  #remove(hash: BlockHash): void {
    const e = this.entries.get(hash);
    if (!e) return;
    this.entries.delete(hash);
    this.leaves.delete(hash);
    const n = (this.childCount.get(e.parent) ?? 1) - 1;
    if (n <= 0) {
      this.childCount.delete(e.parent);
      if (this.entries.has(e.parent)) this.leaves.add(e.parent);
    } else this.childCount.set(e.parent, n);
  }
}
