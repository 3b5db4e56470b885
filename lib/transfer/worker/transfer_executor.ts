/**
 * The worker side of transactional KV transfer: one record per plan id and one answer per phase,
 * each phase run by its role's row in role_phases.ts (the source's and the destination's protocol
 * side by side there).
 * - prepare: the source pins the plan's blocks at their generations (a reused block makes the plan
 *   stale and the answer a refusal); the destination pins the cached parents the plan's chains hang
 *   from and reserves blocks (invisible to routing), reclaiming cold cached ones when too few are
 *   free.
 * - execute: the source gathers and sends the packed payload once; the destination receives and
 *   scatters it into the reserved blocks (through a {@link KvDataPath}). On a one-sided path (CUDA
 *   IPC) the destination starts receiving at prepare, so its go-ahead reaches the source while the
 *   source's execute is on its way; its execute answers once that receive ends.
 * - publish (destination): the received blocks become Ready prefix-cache entries, reported in the
 *   next block delta.
 * - finalize: the source unpins; for move it also frees the safe unreferenced suffix.
 * - abort (any time): every phase's undo, last first: the destination cancels the data path, waits
 *   for it to settle, releases its reservation (or, after publish, takes back the unreferenced
 *   blocks it published); the source unpins. Both sides end as before the plan.
 * A phase runs once the plan's earlier phases received here have answered, so the control plane may
 * send a plan's phases back to back (pipelined) and a failed phase fails the ones behind it.
 * A repeated phase message gets the same answer; a phase after abort is refused. A plan still open
 * at its deadline aborts itself, so a lost control plane cannot strand pins or reservations.
 * @module
 */
import { type Clock, realClock } from "../../core/clock.ts";
import type { BlockManager } from "../../local/block_manager.ts";
import type { KvDataPath } from "../paths/kv_data_path.ts";
import type { MessageOf } from "../../protocol/messages.ts";
import {
  isAborted,
  type LocalPlan,
  newLocalPlan,
  roleName,
  type TransferAckFields,
  type TransferPhaseMessage,
  type TransferPhaseName,
  type TransferRole,
} from "./local_plan.ts";
import {
  type ExecutorCounters,
  type ExecutorSide,
  PhaseRefusal,
  phasesOf,
  undoOrder,
  type WorkerPhase,
} from "./role_phases.ts";

export type { TransferAckFields, TransferPhaseMessage, TransferPhaseName, TransferRole } from "./local_plan.ts";

/** A test hook: make a phase fail (answer not ok) or hang (answer only once the plan aborts). */
export type TransferFaultHook = (
  phase: TransferPhaseName,
  role: TransferRole,
  planId: string,
) => "fail" | "hang" | undefined;

/** Options of a {@link TransferExecutor}. */
export interface TransferExecutorOptions {
  rank: number;
  /** This worker's epoch: a plan naming another epoch of this rank is refused. */
  epoch: number;
  blocks: BlockManager;
  dataPath: KvDataPath;
  /** Time and timers (default the real clock); plans carry wall-clock deadlines (its wallNow()). */
  clock?: Clock;
  faults?: TransferFaultHook;
  /**
   * A plan aborts itself this long after its deadline (default 250 ms): the control plane, which
   * aborts at the deadline, stays in charge unless it is gone.
   */
  deadlineGraceMs?: number;
  /** Finished plans remembered for idempotent answers (default 1024). */
  retainFinished?: number;
}

/** Executes transfer phases against one worker's block manager and KV cache. */
export class TransferExecutor {
  /** Called after every change of blocks (reservations, pins, publish, release): report a delta. */
  onChange: () => void = () => {};
  readonly counters: ExecutorCounters = {
    prepared: 0,
    refused: 0,
    sentBlocks: 0,
    sentBytes: 0,
    receivedBlocks: 0,
    receivedBytes: 0,
    published: 0,
    finalized: 0,
    released: 0,
    aborted: 0,
    deadlineAborts: 0,
  };
  readonly #o: TransferExecutorOptions;
  readonly #clock: Clock;
  readonly #side: ExecutorSide;
  readonly #plans = new Map<string, LocalPlan>();
  /**
   * Host-path plans whose payload is moving: a source from execute to finalize (its bytes may sit
   * in its socket until then), a destination until received.
   */
  readonly #moving = new Set<LocalPlan>();
  #settled: { promise: Promise<void>; resolve: () => void } | undefined;
  #closed = false;

  constructor(o: TransferExecutorOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.#side = {
      rank: o.rank,
      blocks: o.blocks,
      dataPath: o.dataPath,
      clock: this.#clock,
      counters: this.counters,
      startMoving: (plan) => void this.#moving.add(plan),
      stopMoving: (plan) => this.#stopMoving(plan),
      changed: () => this.onChange(),
      finished: (plan) => this.#forgetLater(plan),
    };
  }

  /** Plans holding pins or reservations here (the scheduler may be waiting on their blocks). */
  get openPlans(): number {
    let n = 0;
    for (const p of this.#plans.values()) if (p.pinned.length > 0 || p.reserved.length > 0) n++;
    return n;
  }

  /**
   * Host-path payloads on their way through this worker (sending, or receiving). They move only
   * while the worker's event loop turns, so the worker holds its next step while any is. A direct
   * path (NVLink) moves without this worker's loop and never counts.
   */
  get payloadsInFlight(): number {
    return this.#moving.size;
  }

  /** Resolves once no payload is in flight (at once when none is). */
  payloadsSettled(): Promise<void> {
    if (this.#moving.size === 0) return Promise.resolve();
    if (!this.#settled) {
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#settled = { promise, resolve };
    }
    return this.#settled.promise;
  }

  #stopMoving(plan: LocalPlan): void {
    if (!this.#moving.delete(plan) || this.#moving.size > 0) return;
    this.#settled?.resolve();
    this.#settled = undefined;
  }

  /** Answers one phase message (idempotently). Never rejects. */
  handle(m: TransferPhaseMessage): Promise<TransferAckFields> {
    const phase = m.type.slice("transfer_".length) as TransferPhaseName;
    if (m.type === "transfer_prepare") return this.#prepare(m);
    const plan = this.#plans.get(m.planId);
    if (m.type === "transfer_abort") return this.#abort(m.planId, m.reason);
    if (!plan) {
      return Promise.resolve(
        this.#ack(m.planId, phase, false, { error: `unknown plan ${m.planId} on rank ${this.#o.rank}` }),
      );
    }
    const cached = plan.answers.get(phase);
    if (cached) return cached;
    const earlier = [...plan.answers.values()];
    // A bug or a bad message must answer "not ok", never leave the phase unanswered.
    const answer = Promise.all(earlier)
      .then(() => this.#run(plan, phase, m))
      .catch((e: Error) =>
        this.#ack(m.planId, phase, false, { error: `${phase} on rank ${this.#o.rank} failed: ${e.message}` })
      );
    plan.answers.set(phase, answer);
    return answer;
  }

  /** Aborts every open plan (worker exit). */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#plans.values()].map((p) => this.#abort(p.planId, "worker exiting")));
  }

  /** Checks what both roles check, runs the role's prepare row, and arms the plan's deadline. */
  #prepare(m: MessageOf<"transfer_prepare">): Promise<TransferAckFields> {
    const existing = this.#plans.get(m.planId);
    if (existing) {
      return existing.answers.get("prepare") ??
        Promise.resolve(
          this.#ack(m.planId, "prepare", false, {
            error: `plan ${m.planId} was ${existing.state} before its prepare arrived`,
          }),
        );
    }
    const role: TransferRole | undefined = m.srcRank === this.#o.rank
      ? "src"
      : m.dstRank === this.#o.rank
      ? "dst"
      : undefined;
    const plan = newLocalPlan({
      planId: m.planId,
      role: role ?? "src",
      mode: m.mode,
      peer: role === "src" ? m.dstRank : m.srcRank,
      state: "preparing",
      srcBlocks: m.blocks.map((b) => b.srcBlock),
      entries: m.blocks.map((b) => ({ hash: b.hash, parent: b.parent })),
    });
    this.#plans.set(m.planId, plan);
    const answer = (async (): Promise<TransferAckFields> => {
      const refuse = (error: string) => {
        plan.state = "aborted";
        plan.abortReason ??= error;
        plan.signalAborted();
        this.counters.refused++;
        this.#forgetLater(plan);
        return this.#ack(m.planId, "prepare", false, { error });
      };
      if (this.#closed) return refuse(`rank ${this.#o.rank} is shutting down`);
      if (!role || m.srcRank === m.dstRank) {
        return refuse(
          `plan ${m.planId} moves ${m.srcRank}->${m.dstRank}; rank ${this.#o.rank} is not exactly one side`,
        );
      }
      const epoch = role === "src" ? m.srcEpoch : m.dstEpoch;
      if (epoch !== this.#o.epoch) {
        return refuse(
          `plan ${m.planId} is for rank ${this.#o.rank} epoch ${epoch}, this worker is epoch ${this.#o.epoch}`,
        );
      }
      if (m.deadline <= this.#clock.wallNow()) return refuse(`plan ${m.planId} arrived after its deadline`);
      const fault = await this.#fault("prepare", role, plan);
      if (fault) return refuse(fault);
      if (isAborted(plan)) return refuse(`plan ${m.planId} was aborted while preparing: ${plan.abortReason}`);
      let extra: Partial<TransferAckFields>;
      try {
        extra = phasesOf(role).prepare.run(this.#side, plan, m);
      } catch (e) {
        if (e instanceof PhaseRefusal) return refuse(e.message);
        throw e;
      }
      this.counters.prepared++;
      const grace = this.#o.deadlineGraceMs ?? 250;
      plan.timer = this.#clock.setTimeout(
        () => void this.#abort(plan.planId, "deadline", true),
        Math.max(0, m.deadline + grace - this.#clock.wallNow()),
        { keepsAlive: false },
      );
      this.onChange();
      return this.#ack(m.planId, "prepare", true, extra);
    })().catch((e: Error) => {
      // Nothing was pinned or reserved when a check threw: the plan is simply refused.
      plan.state = "aborted";
      plan.signalAborted();
      return this.#ack(m.planId, "prepare", false, { error: `prepare on rank ${this.#o.rank} failed: ${e.message}` });
    });
    plan.answers.set("prepare", answer);
    return answer;
  }

  /** Runs a phase after prepare through the row of the plan's role. */
  async #run(plan: LocalPlan, phase: TransferPhaseName, m: TransferPhaseMessage): Promise<TransferAckFields> {
    const no = (error: string) => this.#ack(plan.planId, phase, false, { error });
    if (plan.state === "aborted") return no(`plan ${plan.planId} was aborted: ${plan.abortReason ?? "unknown reason"}`);
    const fault = await this.#fault(phase, plan.role, plan);
    if (fault) return no(fault);
    if (isAborted(plan)) return no(`plan ${plan.planId} was aborted: ${plan.abortReason ?? "unknown reason"}`);
    const row = phasesOf(plan.role)[phase as WorkerPhase];
    if (!row) {
      const other: TransferRole = plan.role === "src" ? "dst" : "src";
      if (!phasesOf(other)[phase as WorkerPhase]) return no(`unexpected phase ${phase}`);
      return no(
        `plan ${plan.planId}: ${phase} goes to the ${roleName(other)}, rank ${this.#o.rank} is the ${
          roleName(plan.role)
        }`,
      );
    }
    if (plan.state !== row.from) {
      return no(`cannot ${phase} plan ${plan.planId} on the ${roleName(plan.role)}: it is ${plan.state}`);
    }
    try {
      return this.#ack(plan.planId, phase, true, await row.run(this.#side, plan, m));
    } catch (e) {
      if (e instanceof PhaseRefusal) return no(e.message);
      throw e;
    }
  }

  #abort(planId: string, reason: string, byDeadline = false): Promise<TransferAckFields> {
    let plan = this.#plans.get(planId);
    if (!plan) {
      // Remember the id: a prepare arriving after its abort must be refused.
      plan = newLocalPlan({
        planId,
        role: "src",
        mode: "copy",
        peer: -1,
        state: "aborted",
        abortReason: reason,
        srcBlocks: [],
        entries: [],
      });
      plan.answers.set(
        "prepare",
        Promise.resolve(
          this.#ack(planId, "prepare", false, { error: `plan ${planId} was aborted before its prepare: ${reason}` }),
        ),
      );
      this.#plans.set(planId, plan);
      this.#forgetLater(plan);
    }
    const cached = plan.answers.get("abort");
    if (cached) return cached;
    const p = plan;
    const answer = (async (): Promise<TransferAckFields> => {
      if (p.state === "finalized") {
        return this.#ack(planId, "abort", false, { error: `plan ${planId} already finalized; nothing to abort` });
      }
      const wasOpen = p.state !== "aborted";
      p.state = "aborted";
      p.abortReason ??= reason;
      p.signalAborted();
      this.#clock.clearTimeout(p.timer);
      this.#stopMoving(p);
      if (byDeadline && wasOpen) this.counters.deadlineAborts++;
      let changed = false;
      for (const row of undoOrder(p.role)) {
        if (!row.undo) continue;
        const undone = row.undo(this.#side, p, reason);
        if (undone instanceof Promise ? await undone : undone) changed = true;
      }
      if (wasOpen) this.counters.aborted++;
      this.#forgetLater(p);
      if (changed) this.onChange();
      return this.#ack(planId, "abort", true, {});
    })().catch((e: Error) =>
      this.#ack(planId, "abort", false, { error: `abort on rank ${this.#o.rank} failed: ${e.message}` })
    );
    p.answers.set("abort", answer);
    return answer;
  }

  /** Applies the fault hook: "fail" answers not ok, "hang" waits until the plan is aborted. */
  async #fault(phase: TransferPhaseName, role: TransferRole, plan: LocalPlan): Promise<string | undefined> {
    const f = this.#o.faults?.(phase, role, plan.planId);
    if (f === "fail") return `injected fault at ${phase} on rank ${this.#o.rank} (${role})`;
    if (f === "hang") {
      await plan.aborted;
      return `injected hang at ${phase} on rank ${this.#o.rank} (${role}) ended by abort (${plan.abortReason})`;
    }
    return undefined;
  }

  /** Keeps a finished plan's answers for repeats, evicting the oldest finished beyond the limit. */
  #forgetLater(plan: LocalPlan): void {
    const limit = this.#o.retainFinished ?? 1024;
    let finished = 0;
    for (const p of this.#plans.values()) if (p.state === "finalized" || p.state === "aborted") finished++;
    for (const [id, p] of this.#plans) {
      if (finished <= limit) break;
      if (
        p !== plan && (p.state === "finalized" || p.state === "aborted") && p.pinned.length + p.reserved.length === 0
      ) {
        this.#plans.delete(id);
        finished--;
      }
    }
  }

  #ack(planId: string, phase: TransferPhaseName, ok: boolean, extra: Partial<TransferAckFields>): TransferAckFields {
    return { planId, phase, rank: this.#o.rank, ok, ...extra };
  }
}
