/**
 * A transfer plan as one worker holds it: its side of the plan, its state, the blocks it pinned,
 * reserved or published here, and the answers it gave per phase (so a repeated phase message gets
 * the same answer).
 * @module
 */
import type { TimerHandle } from "../../core/clock.ts";
import type { MessageOf } from "../../protocol/messages.ts";
import type { KvTransferJob } from "../paths/kv_data_path.ts";
// The phase messages register themselves with the codec when this module loads.
import "../transfer_messages.ts";

/** A phase message the executor handles. */
export type TransferPhaseMessage = MessageOf<
  "transfer_prepare" | "transfer_execute" | "transfer_publish" | "transfer_finalize" | "transfer_abort"
>;
/** The answer to one phase (a transfer_ack without type and correlation fields). */
export type TransferAckFields = Omit<MessageOf<"transfer_ack">, "type" | "id" | "replyTo">;
/** Phase names. */
export type TransferPhaseName = TransferAckFields["phase"];
/** Which side of a plan this worker is. */
export type TransferRole = "src" | "dst";

/** Where a plan stands on this worker. */
export type PlanState = "preparing" | "prepared" | "executed" | "published" | "finalized" | "aborted";

/** One plan on this worker. */
export interface LocalPlan {
  planId: string;
  role: TransferRole;
  mode: "copy" | "move";
  peer: number;
  state: PlanState;
  abortReason?: string;
  /** Source: pinned block ids. Destination: pinned parents (until publish), reserved, then published block ids. */
  pinned: number[];
  reserved: number[];
  published: number[];
  srcBlocks: number[];
  entries: { hash: string; parent: string }[];
  answers: Map<TransferPhaseName, Promise<TransferAckFields>>;
  /** Destination: the receive started at prepare (see KvDataPath.receivesAtPrepare). */
  receiving?: Promise<number>;
  /** The payload's send or receive, settled either way (an abort waits for it). */
  execution?: Promise<unknown>;
  /** Aborts the plan a little after its deadline. */
  timer?: TimerHandle;
  aborted: Promise<void>;
  signalAborted: () => void;
}

/** A plan record in state "preparing" (or "aborted", for an abort that arrived before its prepare). */
export function newLocalPlan(
  init: Pick<LocalPlan, "planId" | "role" | "mode" | "peer" | "state" | "srcBlocks" | "entries"> & {
    abortReason?: string;
  },
): LocalPlan {
  const { promise, resolve } = Promise.withResolvers<void>();
  return {
    ...init,
    pinned: [],
    reserved: [],
    published: [],
    answers: new Map(),
    aborted: promise,
    signalAborted: resolve,
  };
}

/** The data path's view of a plan's execute. */
export function jobOf(plan: LocalPlan, srcBlocks: readonly number[], dstBlocks: readonly number[]): KvTransferJob {
  return {
    planId: plan.planId,
    peerRank: plan.peer,
    srcBlocks: Int32Array.from(srcBlocks),
    dstBlocks: Int32Array.from(dstBlocks),
  };
}

/** Re-reads the state after an await (abort may have changed it meanwhile). */
export function isAborted(plan: LocalPlan): boolean {
  return plan.state === "aborted";
}

/** The side's name in messages. */
export function roleName(role: TransferRole): string {
  return role === "src" ? "source" : "destination";
}
