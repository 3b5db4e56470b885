/**
 * The worker's side of the transfer protocol as two tables, the source's and the destination's, side
 * by side: per phase, the state the plan must be in, the handler, and the undo that takes back what
 * the phase left on this worker when the plan aborts.
 *
 * A handler validates the message against the plan, does the phase's work, moves the plan to its
 * next state and returns the ack's extra fields; a {@link PhaseRefusal} answers "not ok" and leaves
 * the plan as it was. A handler re-checks for an abort after each await, and changes the plan's
 * state only with no await between that check and the change. An abort runs every undo of the
 * plan's role, last phase first, each a no-op when its phase left nothing: the payload settles
 * before the blocks it writes are released.
 * @module
 */
import type { Clock } from "../../core/clock.ts";
import type { BlockManager } from "../../local/block_manager.ts";
import type { KvDataPath } from "../paths/kv_data_path.ts";
import type { MessageOf } from "../../protocol/messages.ts";
import {
  isAborted,
  jobOf,
  type LocalPlan,
  type PlanState,
  type TransferAckFields,
  type TransferPhaseMessage,
  type TransferRole,
} from "./local_plan.ts";

/** Counters of an executor. */
export interface ExecutorCounters {
  prepared: number;
  refused: number;
  sentBlocks: number;
  sentBytes: number;
  receivedBlocks: number;
  receivedBytes: number;
  published: number;
  finalized: number;
  released: number;
  aborted: number;
  deadlineAborts: number;
}

/** What a phase handler uses of its executor. */
export interface ExecutorSide {
  readonly rank: number;
  readonly blocks: BlockManager;
  readonly dataPath: KvDataPath;
  readonly clock: Clock;
  readonly counters: ExecutorCounters;
  /** A host-path payload of `plan` moves through this worker's event loop (until stopMoving). */
  startMoving(plan: LocalPlan): void;
  stopMoving(plan: LocalPlan): void;
  /** Blocks changed (pins, reservations, publish, release): report a delta. */
  changed(): void;
  /** The plan finished: keep its answers for repeats, within the executor's limit. */
  finished(plan: LocalPlan): void;
}

/** Answers a phase "not ok" with this message; the plan stays as it was. */
export class PhaseRefusal extends Error {
  override readonly name = "PhaseRefusal";
}

type Extra = Partial<TransferAckFields>;
/** The phases a worker takes part in (abort is every phase's undo). */
export type WorkerPhase = "prepare" | "execute" | "publish" | "finalize";

/** One phase of one role. */
export interface PhaseRow {
  /** The state the plan must be in. */
  from: PlanState;
  run: (side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage) => Extra | Promise<Extra>;
  /** Takes back what the phase left here; true when blocks changed. */
  undo?: (side: ExecutorSide, plan: LocalPlan, reason: string) => boolean | Promise<boolean>;
}

/** Prepare runs synchronously: nothing can abort the plan between the executor's checks and its pins. */
export interface PrepareRow extends PhaseRow {
  run: (side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage) => Extra;
}

/** A role's protocol: the phases it takes part in, in order. */
export interface RolePhases {
  readonly prepare: PrepareRow;
  readonly execute: PhaseRow;
  readonly publish?: PhaseRow;
  readonly finalize: PhaseRow;
}

/** The source: pins its blocks, sends the payload, unpins (a move also frees what it can). */
const SOURCE_PHASES: RolePhases = {
  prepare: { from: "preparing", run: pinSourceBlocks, undo: unpinSourceBlocks },
  execute: { from: "prepared", run: sendPayload, undo: cancelPayload },
  finalize: { from: "executed", run: releaseSource },
};

/** The destination: reserves blocks, receives into them, publishes them, closes. */
const DESTINATION_PHASES: RolePhases = {
  prepare: { from: "preparing", run: reserveBlocks, undo: releaseReservation },
  execute: { from: "prepared", run: receivePayload, undo: cancelPayload },
  publish: { from: "executed", run: publishReceived, undo: takeBackPublished },
  finalize: { from: "published", run: closeDestination },
};

/** The table of a role. */
export function phasesOf(role: TransferRole): RolePhases {
  return role === "src" ? SOURCE_PHASES : DESTINATION_PHASES;
}

/** Every undo of a role, last phase first. */
export function undoOrder(role: TransferRole): PhaseRow[] {
  const p = phasesOf(role);
  return [p.finalize, p.publish, p.execute, p.prepare].filter((row) => row !== undefined);
}

// ---- source ----

/** The plan's blocks must still be published here at the planned generations; they are pinned. */
function pinSourceBlocks(side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage): Extra {
  const { blocks } = m as MessageOf<"transfer_prepare">;
  const bm = side.blocks;
  for (const b of blocks) {
    if (b.srcBlock >= bm.numBlocks) {
      throw new PhaseRefusal(`stale plan ${plan.planId}: block ${b.srcBlock} is outside 0..${bm.numBlocks - 1}`);
    }
    const info = bm.blockInfo(b.srcBlock);
    if (info.hash !== b.hash || info.generation !== b.generation) {
      throw new PhaseRefusal(
        `stale plan ${plan.planId}: source block ${b.srcBlock} is generation ${info.generation} hash ${
          info.hash ?? "none"
        }, the plan expects generation ${b.generation} hash ${b.hash}`,
      );
    }
  }
  if (!bm.pinSource(blocks.map((b) => ({ block: b.srcBlock, generation: b.generation })))) {
    throw new PhaseRefusal(`stale plan ${plan.planId}: a source block is no longer published at its generation`);
  }
  plan.pinned = [...plan.srcBlocks];
  plan.state = "prepared";
  return {};
}

function unpinSourceBlocks(side: ExecutorSide, plan: LocalPlan): boolean {
  const had = plan.pinned.length > 0;
  if (had) side.blocks.unpinSource(plan.pinned);
  plan.pinned = [];
  return had;
}

async function sendPayload(side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage): Promise<Extra> {
  const t0 = side.clock.now();
  const e = m as MessageOf<"transfer_execute">;
  if (!sameBlocks(e.srcBlocks, plan.srcBlocks)) {
    throw new PhaseRefusal(
      `plan ${plan.planId}: execute names source blocks ${e.srcBlocks.join(",")}, pinned ${plan.srcBlocks.join(",")}`,
    );
  }
  // The bytes may sit in this worker's socket until the destination has them: moving until finalize.
  const bytes = await movePayload(
    side,
    plan,
    side.dataPath.send(jobOf(plan, e.srcBlocks, e.dstBlocks ?? [])),
    "finalize",
  );
  if (isAborted(plan)) throw new PhaseRefusal(`plan ${plan.planId} was aborted during execute: ${plan.abortReason}`);
  plan.state = "executed";
  side.counters.sentBlocks += plan.srcBlocks.length;
  side.counters.sentBytes += bytes;
  return { bytes, elapsedMs: side.clock.now() - t0 };
}

/** Unpins; a move also frees the safe unreferenced suffix of what it sent. */
function releaseSource(side: ExecutorSide, plan: LocalPlan): Extra {
  const bm = side.blocks;
  bm.unpinSource(plan.pinned);
  plan.pinned = [];
  side.stopMoving(plan);
  const released = plan.mode === "move" ? bm.reclaimSuffix(plan.srcBlocks) : [];
  plan.state = "finalized";
  side.clock.clearTimeout(plan.timer);
  side.counters.finalized++;
  side.counters.released += released.length;
  side.finished(plan);
  side.changed();
  return { released: released.length };
}

// ---- destination ----

/**
 * Pins the cached parents the plan's chains hang from (the reservation may reclaim cached blocks,
 * never those) and reserves blocks, invisible to routing. On a one-sided path the receive starts
 * now, so its go-ahead to the source overlaps the control plane's execute.
 */
function reserveBlocks(side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage): Extra {
  const { blocks } = m as MessageOf<"transfer_prepare">;
  const bm = side.blocks;
  const inPlan = new Set(blocks.map((b) => b.hash));
  const kept = bm.pinCached(blocks.map((b) => b.parent).filter((h) => !inPlan.has(h)));
  const got = bm.reserve(blocks.length);
  if (!got) {
    bm.unpinSource(kept);
    throw new PhaseRefusal(
      `rank ${side.rank} cannot reserve ${blocks.length} blocks for plan ${plan.planId} (${bm.numAvailableBlocks} free or reclaimable)`,
    );
  }
  plan.pinned = kept;
  plan.reserved = got;
  plan.state = "prepared";
  if (side.dataPath.receivesAtPrepare?.(plan.peer)) {
    plan.receiving = side.dataPath.receive(jobOf(plan, plan.srcBlocks, plan.reserved));
    plan.execution = plan.receiving.catch(() => {});
  }
  return { dstBlocks: [...plan.reserved] };
}

function releaseReservation(side: ExecutorSide, plan: LocalPlan): boolean {
  const had = plan.pinned.length + plan.reserved.length > 0;
  if (plan.pinned.length > 0) side.blocks.unpinSource(plan.pinned);
  if (plan.reserved.length > 0) side.blocks.releaseReserved(plan.reserved);
  plan.pinned = [];
  plan.reserved = [];
  return had;
}

async function receivePayload(side: ExecutorSide, plan: LocalPlan, m: TransferPhaseMessage): Promise<Extra> {
  const t0 = side.clock.now();
  const e = m as MessageOf<"transfer_execute">;
  if (e.dstBlocks && !sameBlocks(e.dstBlocks, plan.reserved)) {
    throw new PhaseRefusal(
      `plan ${plan.planId}: execute names destination blocks ${e.dstBlocks.join(",")}, reserved ${
        plan.reserved.join(",")
      }`,
    );
  }
  const op = plan.receiving ?? side.dataPath.receive(jobOf(plan, e.srcBlocks, plan.reserved));
  const bytes = await movePayload(side, plan, op, "received");
  if (isAborted(plan)) throw new PhaseRefusal(`plan ${plan.planId} was aborted during execute: ${plan.abortReason}`);
  plan.state = "executed";
  side.counters.receivedBlocks += plan.reserved.length;
  side.counters.receivedBytes += bytes;
  return { bytes, elapsedMs: side.clock.now() - t0 };
}

/** The received blocks become Ready prefix-cache entries, reported in the next block delta. */
function publishReceived(side: ExecutorSide, plan: LocalPlan): Extra {
  const bm = side.blocks;
  const published = bm.publishReserved(
    plan.reserved.map((block, i) => ({
      block,
      hash: plan.entries[i]!.hash,
      parent: plan.entries[i]!.parent,
      ...(plan.mode === "move" ? { moved: true } : {}),
    })),
  );
  plan.reserved = [];
  // The kept parents now have published children: reclamation cannot take them before those.
  bm.unpinSource(plan.pinned);
  plan.pinned = [];
  plan.published = published;
  plan.state = "published";
  // Published data is valid on its own: a lost control plane must not undo it at the deadline.
  side.clock.clearTimeout(plan.timer);
  side.counters.published += published.length;
  side.changed();
  return {};
}

/** Undoes a publish: blocks nobody references yet go back to free. */
function takeBackPublished(side: ExecutorSide, plan: LocalPlan): boolean {
  const taken = plan.published.length > 0 ? side.blocks.reclaimSuffix(plan.published) : [];
  plan.published = [];
  return taken.length > 0;
}

function closeDestination(side: ExecutorSide, plan: LocalPlan): Extra {
  plan.state = "finalized";
  side.finished(plan);
  return {};
}

// ---- both ----

/**
 * Waits for the payload's send or receive; a failure refuses execute (the caller re-checks for an
 * abort before it moves the plan on). Host-path payloads count as
 * moving (the worker holds its next step meanwhile) until received, or, on the source, until
 * finalize.
 */
async function movePayload(
  side: ExecutorSide,
  plan: LocalPlan,
  op: Promise<number>,
  movingUntil: "received" | "finalize",
): Promise<number> {
  if ((side.dataPath.pathOf?.(plan.peer) ?? "host") === "host") side.startMoving(plan);
  plan.execution ??= op.catch(() => {});
  if (movingUntil === "received") void plan.execution.then(() => side.stopMoving(plan));
  let bytes: number;
  try {
    bytes = await op;
  } catch (err) {
    throw new PhaseRefusal(`plan ${plan.planId} execute on rank ${side.rank} failed: ${(err as Error).message}`);
  }
  return bytes;
}

/** Never release blocks a scatter may still write: cancel the payload and wait for it to settle. */
async function cancelPayload(side: ExecutorSide, plan: LocalPlan, reason: string): Promise<boolean> {
  side.dataPath.cancel(plan.planId, reason);
  await plan.execution;
  return false;
}

function sameBlocks(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
