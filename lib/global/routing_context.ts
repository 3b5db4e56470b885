/**
 * What a routing policy sees for one query: the healthy ranks, the topology candidates, per-rank
 * prefix matches (memoised, O(prefix length) each), load including routed-but-unreported work,
 * and capacity net of reservations.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import { AdmittedPrefills } from "./admitted_prefills.ts";
import { DeviceSpeeds } from "./device_cost.ts";
import type { RankCapacity, RankLoad } from "../core/block_snapshot.ts";
import type { GlobalBlockManager, PrefixMatch } from "./global_block_manager.ts";
import type { RouteReservations } from "./route_reservations.ts";
import type { RoutingWeights } from "./routing_weights.ts";
import { PendingPrefixes } from "./pending_prefixes.ts";
import type { NvlinkTopology } from "./topology.ts";

/** A route query: the prompt's complete-block hashes and sizes. */
export interface RouteQuery {
  requestId: string;
  blockHashes: readonly BlockHash[];
  promptTokens: number;
  maxTokens: number;
  /** The ingress GPU; candidates are it and its NVLink partners. Unset: every healthy rank. */
  ingressRank?: number;
  sessionId?: string;
}

/** A policy's pick. */
export interface RouteChoice {
  rank: number;
  /** Short tag saying why (counted in routing stats). */
  reason: string;
}

const UNMEASURED = new DeviceSpeeds();
const NONE_ADMITTED = new AdmittedPrefills();
const NONE_PENDING = new PendingPrefixes();

/** Read-only routing state for one query. */
export class RoutingContext {
  // Filled for every healthy rank by one walk down the hash chain, on first use.
  #matchBlocks: Int32Array | undefined;
  #matchReclaimable: Int32Array | undefined;
  #candidates: readonly number[] | undefined;

  constructor(
    readonly query: RouteQuery,
    readonly blocks: GlobalBlockManager,
    readonly reservations: RouteReservations,
    readonly topology: NvlinkTopology | undefined,
    readonly config: RoutingWeights & { readonly policy: string },
    /** Each rank's measured step speed against the device cost model (default: as modelled). */
    readonly speeds: DeviceSpeeds = UNMEASURED,
    /** Prefills the ranks admitted and have not finished (default: none known). */
    readonly prefills: AdmittedPrefills = NONE_ADMITTED,
    /** Prompts routed to each rank and not yet prefilled (default: none known). */
    readonly pending: PendingPrefixes = NONE_PENDING,
  ) {}

  /** Ranks with a live page-table slice, ascending. */
  healthyRanks(): readonly number[] {
    return this.blocks.healthyRanks();
  }

  /**
   * The ingress rank and its direct NVLink partners that are healthy; every healthy rank when the
   * query has no ingress rank or none of those is healthy.
   */
  topologyCandidates(): readonly number[] {
    if (this.#candidates) return this.#candidates;
    const ingress = this.query.ingressRank;
    let out: readonly number[] = this.healthyRanks();
    if (ingress !== undefined) {
      // Partners come ascending: merge the ingress rank in where it belongs, keeping healthy ones.
      const group: number[] = [];
      let placed = !this.blocks.isHealthy(ingress);
      for (const r of this.topology?.partners(ingress) ?? []) {
        if (!placed && ingress < r) {
          group.push(ingress);
          placed = true;
        }
        if (this.blocks.isHealthy(r)) group.push(r);
      }
      if (!placed) group.push(ingress);
      if (group.length > 0) out = group;
    }
    this.#candidates = out;
    return out;
  }

  /** Longest contiguous chain of the query's blocks published on `rank`. */
  match(rank: number): PrefixMatch {
    return { blocks: this.matchedBlocks(rank), reclaimable: this.matchedReclaimable(rank) };
  }

  /** Leading blocks of the query published on `rank` (`match(rank).blocks` without the object). */
  matchedBlocks(rank: number): number {
    return (this.#matchBlocks ?? this.#walk())[rank] ?? 0;
  }

  /** Of those, blocks with no live reference (`match(rank).reclaimable`). */
  matchedReclaimable(rank: number): number {
    if (!this.#matchReclaimable) this.#walk();
    return this.#matchReclaimable![rank] ?? 0;
  }

  /** The rank's reported load (zeros for an unknown rank). */
  load(rank: number): RankLoad {
    return this.blocks.table(rank)?.load ?? { numRunning: 0, numWaiting: 0, runningTokens: 0, waitingTokens: 0 };
  }

  /** The rank's reported capacity. */
  capacity(rank: number): RankCapacity {
    return this.blocks.table(rank)?.capacity ?? { numBlocks: 0, blockSize: 1, numFree: 0, numReclaimable: 0 };
  }

  /** Running + waiting requests, plus those routed there but not yet in its report. */
  outstandingRequests(rank: number): number {
    const l = this.load(rank);
    return l.numRunning + l.numWaiting + this.reservations.pendingRequests(rank);
  }

  /** Waiting requests, plus routed-but-unreported ones (a queue depth). */
  waitingRequests(rank: number): number {
    return this.load(rank).numWaiting + this.reservations.pendingRequests(rank);
  }

  /** Fraction of the rank's blocks in live use or reserved, 0..1. */
  kvUtilization(rank: number): number {
    const c = this.capacity(rank);
    if (c.numBlocks === 0) return 1;
    const used = c.numBlocks - c.numFree - c.numReclaimable + this.reservations.reservedBlocks(rank);
    return Math.min(1, Math.max(0, used / c.numBlocks));
  }

  /** Published blocks on the rank (its cache "tree" size). */
  cachedBlocks(rank: number): number {
    return this.blocks.table(rank)?.size ?? 0;
  }

  /** Prompt tokens a rank's prefix match saves (one token is always computed). */
  cachedTokens(rank: number): number {
    return this.#tokensOf(rank, this.matchedBlocks(rank));
  }

  /**
   * Prompt tokens cached on `rank` by the time this request's prefill runs there: its published
   * match, or the leading blocks of prompts routed there ahead of it and not yet prefilled
   * (pending_prefixes.ts), whichever is longer.
   */
  expectedCachedTokens(rank: number): number {
    return this.#tokensOf(rank, this.expectedMatchedBlocks(rank));
  }

  /** Leading blocks of the query on `rank` once the prompts routed there ahead of it are prefilled. */
  expectedMatchedBlocks(rank: number): number {
    const q = this.query;
    return Math.max(this.matchedBlocks(rank), this.pending.match(rank, q.blockHashes, q.requestId));
  }

  // Prompt tokens `blocks` leading blocks on `rank` save (one token is always computed).
  #tokensOf(rank: number, blocks: number): number {
    return Math.max(0, Math.min(blocks * this.capacity(rank).blockSize, this.query.promptTokens - 1));
  }

  // One walk down the query's hash chain fills the match of every healthy rank.
  #walk(): Int32Array {
    const span = this.blocks.rankSpan();
    const blocks = new Int32Array(span);
    this.#matchReclaimable = new Int32Array(span);
    this.blocks.matchAll(this.query.blockHashes, blocks, this.#matchReclaimable);
    this.#matchBlocks = blocks;
    return blocks;
  }
}
