/**
 * What a BlockStored event says of a block beyond its hash: its parent, its tokens and (on a
 * sequence's first block) its cache salt. The page table holds hashes only, so the launcher, which
 * hashes every request's tokens anyway, writes each block here as its tokens become known. An entry
 * stays while something pins it (a request in flight that hashed it, a rank that holds it); once
 * unpinned it waits in a bounded first-in-first-out list, so a block published after its request
 * ended (the page table change travels a longer way than the finish) still finds its tokens.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** One block's contents. */
export interface BookEntry {
  parent: BlockHash;
  tokens: readonly number[];
  /** The first block of its sequence: its parent is no block (nil on the wire). */
  first: boolean;
  /** The cache salt of a salted sequence's first block. */
  salt?: string;
}

/** Blocks' contents by hash, bounded except for pinned entries. */
export class BlockBook {
  /** Unpinned entries kept at most (the oldest go first). */
  readonly spare: number;
  readonly #entries = new Map<BlockHash, BookEntry>();
  readonly #pins = new Map<BlockHash, number>();
  /** Unpinned entries, oldest first (a Map keeps insertion order). */
  readonly #unpinned = new Map<BlockHash, true>();
  /** Called when an entry is written for the first time. */
  onRecorded: (hash: BlockHash) => void = () => {};

  constructor(spare: number) {
    if (!Number.isSafeInteger(spare) || spare < 0) throw new RangeError(`spare must be an integer >= 0, got ${spare}`);
    this.spare = spare;
  }

  /** Entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** The entry of `hash`, if known. */
  get(hash: BlockHash): BookEntry | undefined {
    return this.#entries.get(hash);
  }

  /** Writes `hash`'s contents (a second write of a known hash changes nothing: equal hashes, equal blocks). */
  record(hash: BlockHash, entry: BookEntry): void {
    if (this.#entries.has(hash)) return;
    this.#entries.set(hash, entry);
    if (!this.#pins.has(hash)) this.#park(hash);
    this.onRecorded(hash);
  }

  /** One more holder of `hash` (its entry, known or to come, stays while pinned). */
  pin(hash: BlockHash): void {
    const n = this.#pins.get(hash) ?? 0;
    this.#pins.set(hash, n + 1);
    if (n === 0) this.#unpinned.delete(hash);
  }

  /** One holder fewer; at none the entry joins the bounded list. */
  unpin(hash: BlockHash): void {
    const n = this.#pins.get(hash);
    if (n === undefined) return;
    if (n > 1) {
      this.#pins.set(hash, n - 1);
      return;
    }
    this.#pins.delete(hash);
    if (this.#entries.has(hash)) this.#park(hash);
  }

  #park(hash: BlockHash): void {
    this.#unpinned.delete(hash);
    this.#unpinned.set(hash, true);
    while (this.#unpinned.size > this.spare) {
      const oldest = this.#unpinned.keys().next().value!;
      this.#unpinned.delete(oldest);
      this.#entries.delete(oldest);
    }
  }
}
