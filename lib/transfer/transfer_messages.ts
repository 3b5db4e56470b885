/**
 * Transactional KV-transfer phases (control plane <-> workers), keyed by plan id:
 * prepare -> execute -> publish -> finalize, or abort. Phases are idempotent per (planId, phase);
 * hashes, generations and physical block ids travel here, K/V payloads never do.
 * @module
 */
import { z } from "zod";
import { Count, CountList, envelope } from "../protocol/envelope.ts";
import { registerMessages } from "../protocol/messages.ts";
import { TRANSFER_FAST_CHECKS } from "./transfer_fast_checks.ts";

/** copy keeps the source replica; move releases a safe unreferenced source suffix at finalize. */
const TransferMode = z.enum(["copy", "move"]);
/** The phases of one plan. */
const TransferPhase = z.enum(["prepare", "execute", "publish", "finalize", "abort"]);

const PlanId = z.string().min(1);

/** One source block of a plan, pinned to its generation (a reused block id fails the check). */
const TransferBlock = z.object({ hash: z.string(), parent: z.string(), srcBlock: Count, generation: Count });

/** Lock the source generations (source) / reserve destination blocks (destination). */
const TransferPrepareMessage = z.object({
  type: z.literal("transfer_prepare"),
  ...envelope,
  planId: PlanId,
  mode: TransferMode,
  srcRank: Count,
  dstRank: Count,
  srcEpoch: Count,
  dstEpoch: Count,
  blocks: z.array(TransferBlock).min(1),
  /** Absolute deadline (ms since the epoch); a plan still open then is aborted on both sides. */
  deadline: z.number(),
});

/**
 * Move the packed K/V: the source gathers and sends, the destination receives and scatters.
 * `dstBlocks` is absent when the control plane sends execute right behind prepare, before the
 * destination named its reserved blocks (the destination uses its reservation; a one-sided path
 * tells the source).
 */
const TransferExecuteMessage = z.object({
  type: z.literal("transfer_execute"),
  ...envelope,
  planId: PlanId,
  srcRank: Count,
  dstRank: Count,
  srcBlocks: CountList,
  dstBlocks: CountList.optional(),
});

/** Destination: make the received blocks visible (Ready, hashed, in the next snapshot). */
const TransferPublishMessage = z.object({ type: z.literal("transfer_publish"), ...envelope, planId: PlanId });

/** Source: end the plan; for move, release the safe unreferenced source suffix. */
const TransferFinalizeMessage = z.object({
  type: z.literal("transfer_finalize"),
  ...envelope,
  planId: PlanId,
  mode: TransferMode,
});

/** Both sides: undo the plan (free destination reservations, unlock the source). */
const TransferAbortMessage = z.object({
  type: z.literal("transfer_abort"),
  ...envelope,
  planId: PlanId,
  reason: z.string(),
});

/** Worker -> control plane: outcome of one phase (reply to the phase message). */
const TransferAckMessage = z.object({
  type: z.literal("transfer_ack"),
  ...envelope,
  planId: PlanId,
  phase: TransferPhase,
  rank: Count,
  ok: z.boolean(),
  /** prepare on the destination: the reserved block ids, in plan order. */
  dstBlocks: CountList.optional(),
  /** Bytes moved and time taken, for the cost model's online estimate (execute). */
  bytes: Count.optional(),
  elapsedMs: z.number().nonnegative().optional(),
  /** finalize of a move on the source: blocks released there. */
  released: Count.optional(),
  /** Time the worker spent from reading the phase message to sending this ack, ms. */
  handledMs: z.number().nonnegative().optional(),
  /**
   * When the worker read the phase message (ms since the epoch, sub-millisecond: the process's
   * performance.timeOrigin + now()): with handledMs it splits a round trip into the way there and
   * back in the coordinator's trace (processes of one host share the clock).
   */
  receivedAt: z.number().optional(),
  error: z.string().optional(),
});

/** The phase messages by type, as the protocol's registry holds them. */
const TRANSFER_SCHEMAS = {
  transfer_prepare: TransferPrepareMessage,
  transfer_execute: TransferExecuteMessage,
  transfer_publish: TransferPublishMessage,
  transfer_finalize: TransferFinalizeMessage,
  transfer_abort: TransferAbortMessage,
  transfer_ack: TransferAckMessage,
} as const;
type TransferSchemas = typeof TRANSFER_SCHEMAS;

declare module "../protocol/messages.ts" {
  /** The transfer phase messages (registered by lib/transfer/transfer_messages.ts). */
  interface MessageSchemas extends TransferSchemas {}
}

registerMessages(TRANSFER_SCHEMAS, TRANSFER_FAST_CHECKS);
