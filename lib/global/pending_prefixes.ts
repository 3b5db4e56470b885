/**
 * Prompts routed to a rank whose prefill has not finished there: the blocks that rank is about to
 * compute. A request routed behind one of them on the same rank finds those blocks cached by the
 * time its own prefill runs (a rank's scheduler admits in arrival order), so the lmpool cost prices
 * its prefill as a hit there, as SGLang's router does by inserting routed text into its tree at
 * once. Without this, simultaneous requests of one cold prefix see no holder anywhere and spread,
 * each prefilling the prefix anew. A prompt stops being pending when the rank publishes its last
 * complete block (the page table then holds it), when the request ends, when the rank dies, or
 * after the reservation TTL (a request the control plane lost track of).
 *
 * Block hashes are chained (equal hashes at position i mean equal prefixes up to i), so the blocks
 * two prompts share are found by a binary search for the last position where they agree. Prompts
 * are indexed per rank by their first block: adding and ending one is O(1), and a query compares
 * itself only with the pending prompts that start like it, in O(log length) each.
 * @module
 */
import { type BlockHash, sharedBlocks } from "../core/block_hash.ts";

interface PendingPrompt {
  requestId: string;
  rank: number;
  hashes: readonly BlockHash[];
  createdAt: number;
}

/** Routed, unfinished prompts per rank, indexed by their first block. */
export class PendingPrefixes {
  // Insertion order is creation order, so expiry scans only the expired head.
  readonly #byRequest = new Map<string, PendingPrompt>();
  // Per rank: first block hash -> the prompts starting with it.
  readonly #byRank = new Map<number, Map<BlockHash, Set<PendingPrompt>>>();

  /** Routed prompts still pending. */
  get size(): number {
    return this.#byRequest.size;
  }

  /** `requestId` was routed to `rank` with prompt blocks `hashes` (replacing an earlier entry). */
  add(requestId: string, rank: number, hashes: readonly BlockHash[], now: number): void {
    this.end(requestId);
    if (hashes.length === 0) return;
    const p: PendingPrompt = { requestId, rank, hashes, createdAt: now };
    this.#byRequest.set(requestId, p);
    let byFirst = this.#byRank.get(rank);
    if (!byFirst) this.#byRank.set(rank, byFirst = new Map());
    let same = byFirst.get(hashes[0]!);
    if (!same) byFirst.set(hashes[0]!, same = new Set());
    same.add(p);
  }

  /**
   * Leading blocks of `hashes` that prompts pending on `rank` will compute, those of request
   * `except` (the one asking: its own prompt is no prefix ahead of it) not counted.
   */
  match(rank: number, hashes: readonly BlockHash[], except?: string): number {
    if (hashes.length === 0) return 0;
    const same = this.#byRank.get(rank)?.get(hashes[0]!);
    if (!same) return 0;
    let best = 0;
    for (const p of same) {
      if (p.requestId === except) continue;
      const n = sharedBlocks(p.hashes, hashes);
      if (n > best) best = n;
    }
    return best;
  }

  /** Ends the prompts pending on `rank` whose last block `published` says the rank now holds. */
  settle(rank: number, published: (hash: BlockHash) => boolean): void {
    const byFirst = this.#byRank.get(rank);
    if (!byFirst) return;
    for (const same of byFirst.values()) {
      for (const p of same) if (published(p.hashes.at(-1)!)) this.end(p.requestId);
    }
  }

  /** Ends one prompt (prefilled, ended or never dispatched). Idempotent. */
  end(requestId: string): void {
    const p = this.#byRequest.get(requestId);
    if (!p) return;
    this.#byRequest.delete(requestId);
    const byFirst = this.#byRank.get(p.rank)!;
    const same = byFirst.get(p.hashes[0]!)!;
    same.delete(p);
    if (same.size === 0) byFirst.delete(p.hashes[0]!);
  }

  /** The rank died: its pending prompts go. */
  dropRank(rank: number): void {
    for (const same of this.#byRank.get(rank)?.values() ?? []) {
      for (const p of same) this.#byRequest.delete(p.requestId);
    }
    this.#byRank.delete(rank);
  }

  /** Ends prompts routed before `now - ttlMs`. */
  expire(now: number, ttlMs: number): void {
    for (const [id, p] of this.#byRequest) {
      if (now - p.createdAt < ttlMs) break;
      this.end(id);
    }
  }
}
