/**
 * What a worker's block manager reports to the control plane: full snapshots (on start, on
 * request, after a control-plane restart) and deltas in between. Only Ready, hashed blocks are
 * reported: reserved, writing and received-but-unpublished blocks stay invisible to routing.
 * @module
 */
import type { BlockHash } from "./block_hash.ts";

/** One published cached block on one rank. */
export interface BlockEntry {
  hash: BlockHash;
  /** Parent block's hash ("" or the salt root for a first block). */
  parent: BlockHash;
  /** Physical block id on the rank. */
  block: number;
  /** Generation of the physical block: bumped every time the id is reused. */
  generation: number;
  /** Live request references (0 = reclaimable prefix-cache entry). */
  refCount: number;
  /** Last access (ms on the host clock, comparable across a host's workers) and cumulative access count. */
  lastAccess: number;
  accessCount: number;
}

/** Load of one rank as routing weighs it. */
export interface RankLoad {
  numRunning: number;
  numWaiting: number;
  /** Tokens of running sequences (context) and tokens still to prefill for waiting ones. */
  runningTokens: number;
  waitingTokens: number;
}

/** Capacity counters of one rank. */
export interface RankCapacity {
  numBlocks: number;
  blockSize: number;
  numFree: number;
  numReclaimable: number;
}

/** The whole published state of one rank; replaces that rank's metadata atomically. */
export interface BlockSnapshot {
  rank: number;
  /** Changes when the worker restarts; older epochs are rejected. */
  epoch: number;
  /** Monotonic per epoch; a snapshot or delta not newer than the applied one is rejected. */
  version: number;
  capacity: RankCapacity;
  load: RankLoad;
  entries: BlockEntry[];
}

/** Changes since `baseVersion`; applies only on top of exactly that version. */
export interface BlockDelta {
  rank: number;
  epoch: number;
  baseVersion: number;
  version: number;
  capacity: RankCapacity;
  load: RankLoad;
  added: BlockEntry[];
  /** Blocks no longer published (reclaimed, or moved away). */
  removed: { hash: BlockHash; block: number; generation: number }[];
  /** Reference/recency changes of still-published blocks. */
  touched: { hash: BlockHash; block: number; refCount: number; lastAccess: number; accessCount: number }[];
}
