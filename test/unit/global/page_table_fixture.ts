// Builders of realistic block snapshots for the global tests: chained hashes of real token blocks.
import { type BlockHash, prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import type { BlockEntry, BlockSnapshot, RankLoad } from "../../../lib/core/block_snapshot.ts";

export const BLOCK = 16;

/** Prompt tokens: `shared` tokens from stream `prefix`, then `own` tokens from stream `suffix`. */
export function promptTokens(prefix: number, shared: number, suffix = -1, own = 0): number[] {
  const out: number[] = [];
  for (let i = 0; i < shared; i++) out.push((prefix * 7919 + i * 31) % 50000);
  for (let i = 0; i < own; i++) out.push((suffix * 104729 + i * 17 + 1) % 50000);
  return out;
}

/** Hashes of the complete blocks of `tokens`. */
export function hashesOf(tokens: number[]): BlockHash[] {
  return prefixBlockHashes(tokens, BLOCK);
}

/** Published entries for a chain of hashes, physical ids from `firstBlock`. */
export function chainEntries(hashes: readonly BlockHash[], firstBlock = 0, refCount = 0): BlockEntry[] {
  return hashes.map((hash, i) => ({
    hash,
    parent: i === 0 ? "" : hashes[i - 1]!,
    block: firstBlock + i,
    generation: 1,
    refCount,
    lastAccess: i,
    accessCount: 1,
  }));
}

export const IDLE: RankLoad = { numRunning: 0, numWaiting: 0, runningTokens: 0, waitingTokens: 0 };

/** A snapshot with sensible defaults: 1000 blocks, everything not published is free. */
export function snapshot(
  rank: number,
  o: Partial<Omit<BlockSnapshot, "capacity">> & { numBlocks?: number; free?: number; reclaimable?: number } = {},
): BlockSnapshot {
  const entries = o.entries ?? [];
  const numBlocks = o.numBlocks ?? 1000;
  const reclaimable = o.reclaimable ?? entries.filter((e) => e.refCount === 0).length;
  return {
    rank,
    epoch: o.epoch ?? 1,
    version: o.version ?? 1,
    capacity: {
      numBlocks,
      blockSize: BLOCK,
      numFree: o.free ?? numBlocks - entries.length,
      numReclaimable: reclaimable,
    },
    load: o.load ?? IDLE,
    entries,
  };
}

/** The fields of a delta of `rank` (epoch 1, 1000 free blocks) that add, remove and touch nothing. */
export function deltaBase(rank: number) {
  return {
    rank,
    epoch: 1,
    capacity: { numBlocks: 1000, blockSize: BLOCK, numFree: 1000, numReclaimable: 0 },
    added: [],
    removed: [],
    touched: [],
  };
}
