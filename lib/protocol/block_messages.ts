/**
 * Block metadata messages (worker -> control plane): full snapshots, deltas on top of an exact
 * base version, and the control plane's request for a full snapshot. Shapes follow
 * lib/core/block_snapshot.ts exactly.
 * @module
 */
import { z } from "zod";
import type { BlockDelta, BlockEntry, BlockSnapshot, RankCapacity, RankLoad } from "../core/block_snapshot.ts";
import { Count, envelope } from "./envelope.ts";

const Hash = z.string();

/** Schema of one published block. */
const BlockEntrySchema: z.ZodType<BlockEntry> = z.object({
  hash: Hash,
  parent: Hash,
  block: Count,
  generation: Count,
  refCount: Count,
  lastAccess: z.number(),
  accessCount: Count,
});

/** Schema of a rank's load counters. */
const RankLoadSchema: z.ZodType<RankLoad> = z.object({
  numRunning: Count,
  numWaiting: Count,
  runningTokens: Count,
  waitingTokens: Count,
});

/** Schema of a rank's capacity counters. */
const RankCapacitySchema: z.ZodType<RankCapacity> = z.object({
  numBlocks: Count,
  blockSize: z.number().int().positive(),
  numFree: Count,
  numReclaimable: Count,
});

/** Schema of a full snapshot. */
export const BlockSnapshotSchema: z.ZodType<BlockSnapshot> = z.object({
  rank: Count,
  epoch: Count,
  version: Count,
  capacity: RankCapacitySchema,
  load: RankLoadSchema,
  entries: z.array(BlockEntrySchema),
});

/** Schema of a delta. */
const BlockDeltaSchema: z.ZodType<BlockDelta> = z.object({
  rank: Count,
  epoch: Count,
  baseVersion: Count,
  version: Count,
  capacity: RankCapacitySchema,
  load: RankLoadSchema,
  added: z.array(BlockEntrySchema),
  removed: z.array(z.object({ hash: Hash, block: Count, generation: Count })),
  touched: z.array(z.object({ hash: Hash, block: Count, refCount: Count, lastAccess: z.number(), accessCount: Count })),
});

/**
 * Request ids whose effect the attached counters now include: `queued` entered the worker's queue
 * (its load counts them), `allocated` got their prompt blocks (its capacity counts them). Route
 * reservations for those ids are released accordingly. A full snapshot lists every request the
 * worker holds; a delta lists those that changed since the previous report.
 */
const reflected = {
  queued: z.array(z.string()).optional(),
  allocated: z.array(z.string()).optional(),
};

/** A worker's full published state (replaces the rank's metadata atomically). */
export const BlockSnapshotMessage = z.object({
  type: z.literal("block_snapshot"),
  ...envelope,
  snapshot: BlockSnapshotSchema,
  ...reflected,
});

/** A worker's changes since `delta.baseVersion`. */
export const BlockDeltaMessage = z.object({
  type: z.literal("block_delta"),
  ...envelope,
  delta: BlockDeltaSchema,
  ...reflected,
});

/** Control plane -> worker: send a full snapshot (after a rejected delta or a restart). */
export const SnapshotRequestMessage = z.object({
  type: z.literal("snapshot_request"),
  ...envelope,
  reason: z.string(),
});
