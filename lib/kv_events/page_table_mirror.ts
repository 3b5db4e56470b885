/**
 * The launcher's copy of which blocks each rank holds, kept from the control plane's page-table
 * changes (lib/kv_events/page_table_messages.ts): per rank a set of hashes (with parents), and per
 * hash the number of ranks holding it. It reports every change of a rank's set and of the node's
 * union, and a rank whose cache was lost whole (its worker dropped, or back with a new epoch).
 * A full state replaces a rank's set by difference, so a control plane that restarted and resent
 * every rank changes nothing that did not change.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** Who hears of the changes. */
export interface MirrorListener {
  /** `hash` entered (held) or left rank `rank`'s set. */
  rankChanged(rank: number, hash: BlockHash, held: boolean): void;
  /** `hash` entered the node (first copy on any rank) or left it (last copy gone). */
  nodeChanged(hash: BlockHash, held: boolean): void;
  /** Rank `rank`'s whole cache was lost (reported before the changes that empty it). */
  rankCleared(rank: number): void;
}

interface RankSet {
  epoch: number;
  blocks: Map<BlockHash, BlockHash>;
}

/** Per-rank block sets and the node's union. */
export class PageTableMirror {
  readonly #ranks = new Map<number, RankSet>();
  readonly #holders = new Map<BlockHash, number>();
  readonly #listener: MirrorListener;

  constructor(listener: MirrorListener) {
    this.#listener = listener;
  }

  /** True when rank `rank` holds `hash`. */
  holds(rank: number, hash: BlockHash): boolean {
    return this.#ranks.get(rank)?.blocks.has(hash) ?? false;
  }

  /** True when some rank holds `hash`. */
  heldAnywhere(hash: BlockHash): boolean {
    return this.#holders.has(hash);
  }

  /** Hashes rank `rank` holds. */
  hashesOf(rank: number): Iterable<BlockHash> {
    return this.#ranks.get(rank)?.blocks.keys() ?? [];
  }

  /** Hashes some rank holds. */
  allHashes(): Iterable<BlockHash> {
    return this.#holders.keys();
  }

  /** Blocks rank `rank` holds. */
  rankSize(rank: number): number {
    return this.#ranks.get(rank)?.blocks.size ?? 0;
  }

  /** Blocks held on the node (each counted once). */
  get nodeSize(): number {
    return this.#holders.size;
  }

  /** Rank `rank` holds exactly `hashes` (with `parents`), at `epoch`. */
  applyFull(rank: number, epoch: number, hashes: readonly BlockHash[], parents: readonly BlockHash[]): void {
    const cur = this.#ranks.get(rank);
    if (cur && cur.epoch !== epoch) this.drop(rank);
    const set = this.#rankSet(rank, epoch);
    const next = new Map<BlockHash, BlockHash>();
    for (let i = 0; i < hashes.length; i++) next.set(hashes[i]!, parents[i]!);
    for (const h of [...set.blocks.keys()]) if (!next.has(h)) this.#remove(rank, set, h);
    for (const [h, p] of next) if (!set.blocks.has(h)) this.#add(rank, set, h, p);
  }

  /** Rank `rank` lost `removed` and gained `hashes` (removals first, as a worker's delta applies). */
  applyDelta(
    rank: number,
    epoch: number,
    hashes: readonly BlockHash[],
    parents: readonly BlockHash[],
    removed: readonly BlockHash[],
  ): void {
    const cur = this.#ranks.get(rank);
    if (cur && cur.epoch !== epoch) this.drop(rank);
    const set = this.#rankSet(rank, epoch);
    for (const h of removed) this.#remove(rank, set, h);
    for (let i = 0; i < hashes.length; i++) this.#add(rank, set, hashes[i]!, parents[i]!);
  }

  /** Rank `rank`'s worker is gone (or restarted): its whole set leaves. */
  drop(rank: number): void {
    const set = this.#ranks.get(rank);
    if (!set) return;
    this.#listener.rankCleared(rank);
    for (const h of [...set.blocks.keys()]) this.#remove(rank, set, h);
    this.#ranks.delete(rank);
  }

  #rankSet(rank: number, epoch: number): RankSet {
    let set = this.#ranks.get(rank);
    if (!set) {
      set = { epoch, blocks: new Map() };
      this.#ranks.set(rank, set);
    }
    return set;
  }

  #add(rank: number, set: RankSet, hash: BlockHash, parent: BlockHash): void {
    if (set.blocks.has(hash)) return;
    set.blocks.set(hash, parent);
    this.#listener.rankChanged(rank, hash, true);
    const n = this.#holders.get(hash) ?? 0;
    this.#holders.set(hash, n + 1);
    if (n === 0) this.#listener.nodeChanged(hash, true);
  }

  #remove(rank: number, set: RankSet, hash: BlockHash): void {
    if (!set.blocks.delete(hash)) return;
    this.#listener.rankChanged(rank, hash, false);
    const n = this.#holders.get(hash) ?? 1;
    if (n > 1) this.#holders.set(hash, n - 1);
    else {
      this.#holders.delete(hash);
      this.#listener.nodeChanged(hash, false);
    }
  }
}
