/**
 * Route reservations: a routed request holds its new blocks (and counts as pending queue work) on
 * the chosen rank until that worker's reports include it, so concurrent routes do not all spend
 * the same stale free-capacity estimate. Released when the worker reports the request queued
 * (pending work) and allocated (blocks), when the request ends, when the rank dies, or after a TTL.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** One routed request's hold on a rank. */
export interface RouteReservation {
  requestId: string;
  rank: number;
  /** Blocks the request will allocate there. */
  blocks: number;
  /** Prefill tokens it adds to the rank's queue until the worker's load counts it. */
  tokens: number;
  /** True once the worker's load counts the request (tokens no longer pending). */
  queued: boolean;
  createdAt: number;
  /** The prompt's last complete block (admitted_prefills.ts follows its prefill by it); none: shorter than a block. */
  lastHash: BlockHash | undefined;
}

interface RankTotals {
  blocks: number;
  tokens: number;
  requests: number;
}

/** All outstanding route reservations, with per-rank totals kept incrementally. */
export class RouteReservations {
  // Insertion order is creation order, so expiry scans only the expired head.
  readonly #byRequest = new Map<string, RouteReservation>();
  readonly #totals = new Map<number, RankTotals>();

  /** Outstanding reservations. */
  get size(): number {
    return this.#byRequest.size;
  }

  /** The reservation of `requestId`, if any. */
  get(requestId: string): Readonly<RouteReservation> | undefined {
    return this.#byRequest.get(requestId);
  }

  /** Reserves for a routed request (replacing an earlier reservation of the same id). */
  reserve(requestId: string, rank: number, blocks: number, tokens: number, now: number, lastHash?: BlockHash): void {
    if (!(blocks >= 0) || !(tokens >= 0)) {
      throw new RangeError(`reservation of ${requestId} needs blocks, tokens >= 0, got ${blocks}, ${tokens}`);
    }
    this.release(requestId);
    const r: RouteReservation = {
      requestId,
      rank,
      blocks,
      tokens,
      queued: false,
      createdAt: now,
      lastHash,
    };
    this.#byRequest.set(requestId, r);
    this.#adjust(rank, blocks, tokens, 1);
  }

  /** The worker's load now counts these requests: their tokens stop being pending. */
  markQueued(rank: number, requestIds: readonly string[]): void {
    for (const id of requestIds) {
      const r = this.#byRequest.get(id);
      if (!r || r.rank !== rank || r.queued) continue;
      r.queued = true;
      this.#adjust(rank, 0, -r.tokens, -1);
    }
  }

  /** The worker's capacity now counts these requests' blocks: their reservations end. */
  markAllocated(rank: number, requestIds: readonly string[]): void {
    for (const id of requestIds) {
      const r = this.#byRequest.get(id);
      if (r && r.rank === rank) this.release(id);
    }
  }

  /** Ends a reservation (request finished, aborted or never dispatched). Idempotent. */
  release(requestId: string): boolean {
    const r = this.#byRequest.get(requestId);
    if (!r) return false;
    this.#byRequest.delete(requestId);
    this.#adjust(r.rank, -r.blocks, r.queued ? 0 : -r.tokens, r.queued ? 0 : -1);
    return true;
  }

  /** Ends every reservation on `rank`; returns their request ids. */
  dropRank(rank: number): string[] {
    const ids: string[] = [];
    for (const r of this.#byRequest.values()) if (r.rank === rank) ids.push(r.requestId);
    for (const id of ids) this.release(id);
    this.#totals.delete(rank);
    return ids;
  }

  /** Ends reservations created before `now - ttlMs`; returns how many. */
  expire(now: number, ttlMs: number): number {
    let n = 0;
    for (const r of this.#byRequest.values()) {
      if (now - r.createdAt < ttlMs) break;
      this.release(r.requestId);
      n++;
    }
    return n;
  }

  /** Blocks reserved on `rank`. */
  reservedBlocks(rank: number): number {
    return this.#totals.get(rank)?.blocks ?? 0;
  }

  /** Prefill tokens routed to `rank` that its load does not count yet. */
  pendingTokens(rank: number): number {
    return this.#totals.get(rank)?.tokens ?? 0;
  }

  /** Requests routed to `rank` that its load does not count yet. */
  pendingRequests(rank: number): number {
    return this.#totals.get(rank)?.requests ?? 0;
  }

  #adjust(rank: number, blocks: number, tokens: number, requests: number): void {
    const t = this.#totals.get(rank) ?? { blocks: 0, tokens: 0, requests: 0 };
    t.blocks += blocks;
    t.tokens += tokens;
    t.requests += requests;
    this.#totals.set(rank, t);
  }
}
