/**
 * The control plane's side of the transfer protocol as one table: each row is a phase, the ranks it
 * goes to (in sending order), the message, the check of its acks, and what a failure there undoes.
 * The coordinator walks the rows in order; on a pipelined pair the rows marked `sendsAhead` go out
 * right behind the row before them, before its acks, and the acks are still checked row by row.
 *
 * The source finalizes before the destination: once the source committed (a move released its
 * blocks) nothing undoes the destination's copy, so the destination's finalize only logs a failure.
 * @module
 */
import type { MessageOf } from "../../protocol/messages.ts";
import type { TransferPlan } from "./transfer_plan.ts";
// The phase messages register themselves with the codec when this module loads.
import "../transfer_messages.ts";

/** Phases the coordinator drives. */
export type CoordinatorPhase = "prepare" | "execute" | "publish" | "finalize";
/** The fields of a worker's transfer_ack. */
export type TransferAck = Omit<MessageOf<"transfer_ack">, "type" | "id" | "replyTo">;
/** A phase message as the coordinator sends it. */
export type PhaseMessage =
  | Omit<MessageOf<"transfer_prepare">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_execute">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_publish">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_finalize">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_abort">, "id" | "replyTo">;

/** How a plan ended. */
export interface PlanOutcome {
  plan: TransferPlan;
  status: "completed" | "aborted";
  /** Where it failed, and why. */
  failedPhase?: CoordinatorPhase;
  reason?: string;
  bytes: number;
  /** Dispatch (prepare sent) to publish acknowledged, ms. */
  publishMs?: number;
  /** Source blocks a move released. */
  released: number;
}

/** A phase failed: an ack refused, a message failed, or an ack carried the wrong thing. */
export class PhaseFailure extends Error {
  override readonly name: string = "PhaseFailure";
}

/** The plan's deadline passed before a phase ended. */
export class DeadlineFailure extends PhaseFailure {
  override readonly name = "DeadlineFailure";
}

/** One plan's walk through the table: what its acks said so far. */
export interface PlanRun {
  readonly plan: TransferPlan;
  /** The workers' epochs the plan was made for (prepare names them). */
  readonly srcEpoch: number;
  readonly dstEpoch: number;
  /** The coordinator's monotonic clock, and its reading when the plan was dispatched. */
  readonly now: () => number;
  readonly t0: number;
  /** Called once both sides accepted prepare (the source pinned its blocks). */
  readonly onPrepared: () => void;
  /** The phase being sent or checked: where a failure is reported. */
  phase: CoordinatorPhase;
  /** The destination's reserved blocks, once its prepare ack named them. */
  dstBlocks?: number[];
  /** Payload bytes and the source's own execute time, from its execute ack. */
  bytes: number;
  sourceMs?: number;
  preparedAt?: number;
  executedAt?: number;
  /** Dispatch to publish acknowledged, ms. */
  publishMs?: number;
  /** Source blocks a move released, from the source's finalize ack. */
  released: number;
}

/** One row of the protocol table. */
export interface PhaseStep {
  phase: CoordinatorPhase;
  /** The ranks the message goes to, at once; acks reach `check` in this order. */
  to: (plan: TransferPlan) => readonly number[];
  message: (run: PlanRun) => PhaseMessage;
  /** On a pipelined pair, sent right behind the row before, without waiting for its acks. */
  sendsAhead: boolean;
  /** The beforePhase hook runs before it (once per phase, so not before the second finalize). */
  hooked: boolean;
  /** Part of dispatch-to-publish: its round trips go into the plan's trace line. */
  traced: boolean;
  /** Reads the acks (all ok): throws a PhaseFailure on a wrong one, records what they carry. */
  check: (acks: readonly TransferAck[], run: PlanRun) => void;
  /** A failure here aborts the plan on both sides, or, past the commit point, is only logged. */
  undo: "abort-both" | "log";
}

/** The protocol, in order. */
export const PLAN_PHASES: readonly PhaseStep[] = [
  // The destination's prepare goes first: its answer (and, on CUDA IPC, its go-ahead to the source)
  // starts the plan's critical path.
  {
    phase: "prepare",
    to: (p) => [p.dst, p.src],
    message: prepareMessage,
    sendsAhead: false,
    hooked: true,
    traced: true,
    check: checkReserved,
    undo: "abort-both",
  },
  {
    phase: "execute",
    to: (p) => [p.src, p.dst],
    message: executeMessage,
    sendsAhead: true,
    hooked: true,
    traced: true,
    check: checkExecuted,
    undo: "abort-both",
  },
  {
    phase: "publish",
    to: (p) => [p.dst],
    message: (r) => ({ type: "transfer_publish", planId: r.plan.planId }),
    sendsAhead: true,
    hooked: true,
    traced: true,
    check: checkPublished,
    undo: "abort-both",
  },
  {
    phase: "finalize",
    to: (p) => [p.src],
    message: finalizeMessage,
    sendsAhead: false,
    hooked: true,
    traced: false,
    check: checkReleased,
    undo: "abort-both",
  },
  // Committed: the destination's finalize is bookkeeping; its failure undoes nothing.
  {
    phase: "finalize",
    to: (p) => [p.dst],
    message: finalizeMessage,
    sendsAhead: false,
    hooked: false,
    traced: false,
    check: () => {},
    undo: "log",
  },
];

function prepareMessage({ plan, srcEpoch, dstEpoch }: PlanRun): PhaseMessage {
  return {
    type: "transfer_prepare",
    planId: plan.planId,
    mode: plan.mode,
    srcRank: plan.src,
    dstRank: plan.dst,
    srcEpoch,
    dstEpoch,
    blocks: plan.blocks,
    deadline: plan.deadline,
  };
}

/** Names the destination's blocks once its prepare reserved them (sent ahead: not yet). */
function executeMessage({ plan, dstBlocks }: PlanRun): PhaseMessage {
  const srcBlocks = plan.blocks.map((b) => b.srcBlock);
  return {
    type: "transfer_execute",
    planId: plan.planId,
    srcRank: plan.src,
    dstRank: plan.dst,
    srcBlocks,
    ...(dstBlocks ? { dstBlocks } : {}),
  };
}

function finalizeMessage({ plan }: PlanRun): PhaseMessage {
  return { type: "transfer_finalize", planId: plan.planId, mode: plan.mode };
}

function checkReserved(acks: readonly TransferAck[], run: PlanRun): void {
  const dstBlocks = acks[0]!.dstBlocks ?? [];
  if (dstBlocks.length !== run.plan.blocks.length) {
    throw new PhaseFailure(
      `destination reserved ${dstBlocks.length} blocks for a ${run.plan.blocks.length}-block plan`,
    );
  }
  run.dstBlocks = dstBlocks;
  run.onPrepared();
  run.preparedAt = run.now();
}

function checkExecuted(acks: readonly TransferAck[], run: PlanRun): void {
  run.bytes = acks[0]!.bytes ?? 0;
  run.sourceMs = acks[0]!.elapsedMs;
  run.executedAt = run.now();
}

function checkPublished(_acks: readonly TransferAck[], run: PlanRun): void {
  run.publishMs = run.now() - run.t0;
}

function checkReleased(acks: readonly TransferAck[], run: PlanRun): void {
  run.released = acks[0]!.released ?? 0;
}
