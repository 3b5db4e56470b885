/**
 * Prompts routed to a rank whose prefill has not finished there: the blocks that rank is about to
 * compute. A request routed behind one of them on the same rank finds those blocks cached by the
 * time its own prefill runs (a rank's scheduler admits in arrival order), so the lmpool cost prices
 * its prefill as a hit there, as SGLang's router does by inserting routed text into its tree at
 * once. Without this, simultaneous requests of one cold prefix see no holder anywhere and spread,
 * each prefilling the prefix anew. A prompt stops being pending when the rank publishes its last
 * complete block (the page table then holds it), when the request ends, when the rank dies, or
 * after the reservation TTL (a request the control plane lost track of).
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

interface PendingPrompt {
  rank: number;
  hashes: readonly BlockHash[];
  createdAt: number;
}

/** Per-rank counts of the block hashes of routed, unfinished prompts. */
export class PendingPrefixes {
  // Insertion order is creation order, so expiry scans only the expired head.
  readonly #byRequest = new Map<string, PendingPrompt>();
  readonly #byRank = new Map<number, Map<BlockHash, number>>();
  // Per rank: the request ids, so a report settles only its own rank's prompts.
  readonly #idsByRank = new Map<number, Set<string>>();

  /** Routed prompts still pending. */
  get size(): number {
    return this.#byRequest.size;
  }

  /** `requestId` was routed to `rank` with prompt blocks `hashes` (replacing an earlier entry). */
  add(requestId: string, rank: number, hashes: readonly BlockHash[], now: number): void {
    this.end(requestId);
    if (hashes.length === 0) return;
    this.#byRequest.set(requestId, { rank, hashes, createdAt: now });
    let counts = this.#byRank.get(rank);
    if (!counts) this.#byRank.set(rank, counts = new Map());
    let ids = this.#idsByRank.get(rank);
    if (!ids) this.#idsByRank.set(rank, ids = new Set());
    ids.add(requestId);
    for (const h of hashes) counts.set(h, (counts.get(h) ?? 0) + 1);
  }

  /**
   * Leading blocks of `hashes` that prompts pending on `rank` will compute, those of request
   * `except` (the one asking: its own prompt is no prefix ahead of it) not counted.
   */
  match(rank: number, hashes: readonly BlockHash[], except?: string): number {
    const counts = this.#byRank.get(rank);
    if (!counts) return 0;
    const own = except === undefined ? undefined : this.#byRequest.get(except);
    const mine = own?.rank === rank ? own.hashes : [];
    let n = 0;
    for (; n < hashes.length; n++) {
      const h = hashes[n]!;
      if ((counts.get(h) ?? 0) <= (mine[n] === h ? 1 : 0)) break;
    }
    return n;
  }

  /** Ends the prompts pending on `rank` whose last block `published` says the rank now holds. */
  settle(rank: number, published: (hash: BlockHash) => boolean): void {
    const ids = this.#idsByRank.get(rank);
    if (!ids) return;
    for (const id of ids) if (published(this.#byRequest.get(id)!.hashes.at(-1)!)) this.end(id);
  }

  /** Ends one prompt (prefilled, ended or never dispatched). Idempotent. */
  end(requestId: string): void {
    const p = this.#byRequest.get(requestId);
    if (!p) return;
    this.#byRequest.delete(requestId);
    this.#idsByRank.get(p.rank)!.delete(requestId);
    const counts = this.#byRank.get(p.rank)!;
    for (const h of p.hashes) {
      const n = counts.get(h)! - 1;
      if (n === 0) counts.delete(h);
      else counts.set(h, n);
    }
  }

  /** The rank died: its pending prompts go. */
  dropRank(rank: number): void {
    for (const id of [...(this.#idsByRank.get(rank) ?? [])]) this.end(id);
    this.#byRank.delete(rank);
    this.#idsByRank.delete(rank);
  }

  /** Ends prompts routed before `now - ttlMs`. */
  expire(now: number, ttlMs: number): void {
    for (const [id, p] of this.#byRequest) {
      if (now - p.createdAt < ttlMs) break;
      this.end(id);
    }
  }
}
