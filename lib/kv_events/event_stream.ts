/**
 * One KV-event stream's view: the blocks it has announced, and the blocks whose state changed
 * since its last batch. A flush compares each changed block with the truth the stream follows (the
 * node's union, or one rank's set) and turns the difference into events, so a block that left and
 * came back between two batches (a move's source released before its destination's publish was
 * heard) produces nothing. Rules of the wire: only blocks whose tokens are known are announced,
 * every parent before its child (a child waits while its parent is unannounced), runs of a chain
 * share one BlockStored; AllBlocksCleared when the stream's cache was lost whole.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockBook, BookEntry } from "./block_book.ts";
import type { BlockStoredEvent, KvEvent } from "./event_batch.ts";
import { wireHash } from "./event_hash.ts";

/** What a stream follows. */
export interface StreamTruth {
  /** True while the stream's cache holds `hash`. */
  holds(hash: BlockHash): boolean;
  /** Every hash the stream's cache holds. */
  all(): Iterable<BlockHash>;
  /** Blocks held. */
  size(): number;
}

/** One stream's announced set and pending changes. */
export class EventStream {
  readonly #truth: StreamTruth;
  readonly #blockSize: number;
  /** A lost rank empties a per-rank stream whole (AllBlocksCleared); the node's only when nothing is left. */
  readonly #clearWhole: boolean;
  readonly #announced = new Set<BlockHash>();
  readonly #dirty = new Set<BlockHash>();
  #clearRequested = false;

  constructor(truth: StreamTruth, blockSize: number, options: { clearWhole: boolean }) {
    this.#truth = truth;
    this.#blockSize = blockSize;
    this.#clearWhole = options.clearWhole;
  }

  /** Blocks announced now. */
  get announcedSize(): number {
    return this.#announced.size;
  }

  /** Changed blocks not yet settled (waiting for their tokens or their parent, or for the next flush). */
  get pendingSize(): number {
    return this.#dirty.size;
  }

  /** `hash` may have changed. */
  touch(hash: BlockHash): void {
    this.#dirty.add(hash);
  }

  /** The cache this stream follows was lost whole (a rank dropped or restarted). */
  cleared(): void {
    this.#clearRequested = true;
  }

  /** The events that bring consumers from the announced set to the truth, as far as tokens are known. */
  flush(book: BlockBook): KvEvent[] {
    const events: KvEvent[] = [];
    if (this.#clearRequested) {
      this.#clearRequested = false;
      if (this.#announced.size > 0 && (this.#clearWhole || this.#truth.size() === 0)) {
        events.push({ type: "AllBlocksCleared" });
        this.#announced.clear();
        for (const h of this.#truth.all()) this.#dirty.add(h);
      }
    }
    const removed: bigint[] = [];
    const candidates = new Map<BlockHash, BookEntry | undefined>();
    for (const h of this.#dirty) {
      const held = this.#truth.holds(h);
      const was = this.#announced.has(h);
      if (was && !held) {
        this.#announced.delete(h);
        removed.push(wireHash(h));
        this.#dirty.delete(h);
      } else if (!was && held) candidates.set(h, book.get(h));
      else this.#dirty.delete(h);
    }
    if (removed.length > 0) events.push({ type: "BlockRemoved", blockHashes: removed });
    events.push(...this.#stores(candidates));
    return events;
  }

  /** BlockStored events for the candidates that can be announced, parents first (depth-first over each chain). */
  #stores(candidates: Map<BlockHash, BookEntry | undefined>): BlockStoredEvent[] {
    const children = new Map<BlockHash, BlockHash[]>();
    const roots: BlockHash[] = [];
    for (const [h, e] of candidates) {
      if (!e) continue; // tokens not known yet: it stays pending, and so do its children
      if (e.first || this.#announced.has(e.parent)) roots.push(h);
      else if (candidates.get(e.parent)) {
        const list = children.get(e.parent);
        if (list) list.push(h);
        else children.set(e.parent, [h]);
      }
    }
    const out: BlockStoredEvent[] = [];
    let run: BlockStoredEvent | undefined;
    let runTail: BlockHash | undefined;
    const stack = roots.reverse();
    while (stack.length > 0) {
      const h = stack.pop()!;
      const e = candidates.get(h)!;
      if (run && runTail === e.parent && !e.first) {
        run.blockHashes.push(wireHash(h));
        for (const t of e.tokens) run.tokenIds.push(t);
        run.extraKeys?.push(null);
      } else {
        run = {
          type: "BlockStored",
          blockHashes: [wireHash(h)],
          parentBlockHash: e.first ? null : wireHash(e.parent),
          tokenIds: [...e.tokens],
          blockSize: this.#blockSize,
          ...(e.salt ? { extraKeys: [[e.salt]] } : {}),
        };
        out.push(run);
      }
      runTail = h;
      this.#announced.add(h);
      this.#dirty.delete(h);
      const kids = children.get(h);
      // The first child continues this run (popped next); the others start runs of their own.
      if (kids) { for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]!); }
    }
    return out;
  }
}
