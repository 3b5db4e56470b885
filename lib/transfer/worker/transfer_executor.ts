/**
 * The worker side of transactional KV transfer: one record per plan id and one answer per phase.
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
 * - abort (any time): the destination cancels the data path, waits for it to settle, releases its
 *   reservation (or, after publish, takes back the unreferenced blocks it published); the source
 *   unpins. Both sides end as before the plan.
 * A phase runs once the plan's earlier phases received here have answered, so the control plane may
 * send a plan's phases back to back (pipelined) and a failed phase fails the ones behind it.
 * A repeated phase message gets the same answer; a phase after abort is refused. A plan still open
 * at its deadline aborts itself, so a lost control plane cannot strand pins or reservations.
 * @module
 */
import type { BlockManager } from "../../local/block_manager.ts";
import type { KvDataPath, KvTransferJob } from "../paths/kv_data_path.ts";
import type { MessageOf } from "../../protocol/messages.ts";
// The phase messages register themselves with the codec when this module loads.
import "../transfer_messages.ts";

/** A phase message the executor handles. */
export type TransferPhaseMessage = MessageOf<"transfer_prepare" | "transfer_execute" | "transfer_publish" | "transfer_finalize" | "transfer_abort">;
/** The answer to one phase (a transfer_ack without type and correlation fields). */
export type TransferAckFields = Omit<MessageOf<"transfer_ack">, "type" | "id" | "replyTo">;
/** Phase names. */
export type TransferPhaseName = TransferAckFields["phase"];
/** Which side of a plan this worker is. */
export type TransferRole = "src" | "dst";
/** A test hook: make a phase fail (answer not ok) or hang (answer only once the plan aborts). */
export type TransferFaultHook = (phase: TransferPhaseName, role: TransferRole, planId: string) => "fail" | "hang" | undefined;

/** Options of a {@link TransferExecutor}. */
export interface TransferExecutorOptions {
  rank: number;
  /** This worker's epoch: a plan naming another epoch of this rank is refused. */
  epoch: number;
  blocks: BlockManager;
  dataPath: KvDataPath;
  /** Wall clock for deadlines (default Date.now: plans carry absolute deadlines). */
  now?: () => number;
  faults?: TransferFaultHook;
  /**
   * A plan aborts itself this long after its deadline (default 250 ms): the control plane, which
   * aborts at the deadline, stays in charge unless it is gone.
   */
  deadlineGraceMs?: number;
  /** Finished plans remembered for idempotent answers (default 1024). */
  retainFinished?: number;
}

type PlanState = "preparing" | "prepared" | "executed" | "published" | "finalized" | "aborted";

interface LocalPlan {
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
  execution?: Promise<unknown>;
  timer?: ReturnType<typeof setTimeout>;
  aborted: Promise<void>;
  signalAborted: () => void;
}

/** Executes transfer phases against one worker's block manager and KV cache. */
export class TransferExecutor {
  /** Called after every change of blocks (reservations, pins, publish, release): report a delta. */
  onChange: () => void = () => {};
  readonly counters = { prepared: 0, refused: 0, sentBlocks: 0, sentBytes: 0, receivedBlocks: 0, receivedBytes: 0, published: 0, finalized: 0, released: 0, aborted: 0, deadlineAborts: 0 };
  readonly #o: TransferExecutorOptions;
  readonly #now: () => number;
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
    this.#now = o.now ?? Date.now;
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
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
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
    if (!plan) return Promise.resolve(this.#ack(m.planId, phase, false, { error: `unknown plan ${m.planId} on rank ${this.#o.rank}` }));
    const cached = plan.answers.get(phase);
    if (cached) return cached;
    const earlier = [...plan.answers.values()];
    // A bug or a bad message must answer "not ok", never leave the phase unanswered.
    const answer = Promise.all(earlier)
      .then(() => this.#run(plan, phase, m))
      .catch((e: Error) => this.#ack(m.planId, phase, false, { error: `${phase} on rank ${this.#o.rank} failed: ${e.message}` }));
    plan.answers.set(phase, answer);
    return answer;
  }

  /** Aborts every open plan (worker exit). */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#plans.values()].map((p) => this.#abort(p.planId, "worker exiting")));
  }

  #prepare(m: MessageOf<"transfer_prepare">): Promise<TransferAckFields> {
    const existing = this.#plans.get(m.planId);
    if (existing) return existing.answers.get("prepare") ?? Promise.resolve(this.#ack(m.planId, "prepare", false, { error: `plan ${m.planId} was ${existing.state} before its prepare arrived` }));
    const role: TransferRole | undefined = m.srcRank === this.#o.rank ? "src" : m.dstRank === this.#o.rank ? "dst" : undefined;
    let signalAborted!: () => void;
    const plan: LocalPlan = {
      planId: m.planId, role: role ?? "src", mode: m.mode, peer: role === "src" ? m.dstRank : m.srcRank, state: "preparing",
      pinned: [], reserved: [], published: [], srcBlocks: m.blocks.map((b) => b.srcBlock), entries: m.blocks.map((b) => ({ hash: b.hash, parent: b.parent })),
      answers: new Map(), aborted: new Promise((r) => (signalAborted = r)), signalAborted,
    };
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
      if (!role || m.srcRank === m.dstRank) return refuse(`plan ${m.planId} moves ${m.srcRank}->${m.dstRank}; rank ${this.#o.rank} is not exactly one side`);
      const epoch = role === "src" ? m.srcEpoch : m.dstEpoch;
      if (epoch !== this.#o.epoch) return refuse(`plan ${m.planId} is for rank ${this.#o.rank} epoch ${epoch}, this worker is epoch ${this.#o.epoch}`);
      if (m.deadline <= this.#now()) return refuse(`plan ${m.planId} arrived after its deadline`);
      const fault = await this.#fault("prepare", role, plan);
      if (fault) return refuse(fault);
      if (isAborted(plan)) return refuse(`plan ${m.planId} was aborted while preparing: ${plan.abortReason}`);
      const bm = this.#o.blocks;
      if (role === "src") {
        for (const b of m.blocks) {
          if (b.srcBlock >= bm.numBlocks) return refuse(`stale plan ${m.planId}: block ${b.srcBlock} is outside 0..${bm.numBlocks - 1}`);
          const info = bm.blockInfo(b.srcBlock);
          if (info.hash !== b.hash || info.generation !== b.generation) {
            return refuse(`stale plan ${m.planId}: source block ${b.srcBlock} is generation ${info.generation} hash ${info.hash ?? "none"}, the plan expects generation ${b.generation} hash ${b.hash}`);
          }
        }
        if (!bm.pinSource(m.blocks.map((b) => ({ block: b.srcBlock, generation: b.generation })))) return refuse(`stale plan ${m.planId}: a source block is no longer published at its generation`);
        plan.pinned = [...plan.srcBlocks];
      } else {
        // The reservation may reclaim cached blocks: never the parents the incoming chains hang from.
        const inPlan = new Set(m.blocks.map((b) => b.hash));
        const kept = bm.pinCached(m.blocks.map((b) => b.parent).filter((h) => !inPlan.has(h)));
        const got = bm.reserve(m.blocks.length);
        if (!got) {
          bm.unpinSource(kept);
          return refuse(`rank ${this.#o.rank} cannot reserve ${m.blocks.length} blocks for plan ${m.planId} (${bm.numAvailableBlocks} free or reclaimable)`);
        }
        plan.pinned = kept;
        plan.reserved = got;
      }
      plan.state = "prepared";
      if (role === "dst") this.#receiveEarly(plan);
      this.counters.prepared++;
      plan.timer = setTimeout(() => void this.#abort(plan.planId, "deadline", true), Math.max(0, m.deadline + (this.#o.deadlineGraceMs ?? 250) - this.#now()));
      (plan.timer as { unref?: () => void }).unref?.();
      this.onChange();
      return this.#ack(m.planId, "prepare", true, role === "dst" ? { dstBlocks: [...plan.reserved] } : {});
    })().catch((e: Error) => {
      // Nothing was pinned or reserved when a check threw: the plan is simply refused.
      plan.state = "aborted";
      plan.signalAborted();
      return this.#ack(m.planId, "prepare", false, { error: `prepare on rank ${this.#o.rank} failed: ${e.message}` });
    });
    plan.answers.set("prepare", answer);
    return answer;
  }

  async #run(plan: LocalPlan, phase: TransferPhaseName, m: TransferPhaseMessage): Promise<TransferAckFields> {
    const no = (error: string) => this.#ack(plan.planId, phase, false, { error });
    if (plan.state === "aborted") return no(`plan ${plan.planId} was aborted: ${plan.abortReason ?? "unknown reason"}`);
    const fault = await this.#fault(phase, plan.role, plan);
    if (fault) return no(fault);
    if (isAborted(plan)) return no(`plan ${plan.planId} was aborted: ${plan.abortReason ?? "unknown reason"}`);
    const bm = this.#o.blocks;
    switch (phase) {
      case "execute": {
        if (plan.state !== "prepared") return no(`cannot execute plan ${plan.planId}: it is ${plan.state}`);
        const e = m as MessageOf<"transfer_execute">;
        const t0 = performance.now();
        const path = this.#o.dataPath;
        if (plan.role === "dst" && e.dstBlocks && (e.dstBlocks.length !== plan.reserved.length || e.dstBlocks.some((b, i) => b !== plan.reserved[i]))) {
          return no(`plan ${plan.planId}: execute names destination blocks ${e.dstBlocks.join(",")}, reserved ${plan.reserved.join(",")}`);
        }
        const dstBlocks = plan.role === "dst" ? plan.reserved : (e.dstBlocks ?? []);
        const job = jobOf(plan, e.srcBlocks, dstBlocks);
        if (plan.role === "src" && (e.srcBlocks.length !== plan.srcBlocks.length || e.srcBlocks.some((b, i) => b !== plan.srcBlocks[i]))) {
          return no(`plan ${plan.planId}: execute names source blocks ${e.srcBlocks.join(",")}, pinned ${plan.srcBlocks.join(",")}`);
        }
        const op = plan.role === "src" ? path.send(job) : (plan.receiving ?? path.receive(job));
        if ((path.pathOf?.(plan.peer) ?? "host") === "host") this.#moving.add(plan);
        plan.execution ??= op.catch(() => {});
        // The source's bytes may still sit in its socket until the destination has them (finalize).
        if (plan.role === "dst") void plan.execution.then(() => this.#stopMoving(plan));
        let bytes: number;
        try {
          bytes = await op;
        } catch (err) {
          return no(`plan ${plan.planId} execute on rank ${this.#o.rank} failed: ${(err as Error).message}`);
        }
        if (isAborted(plan)) return no(`plan ${plan.planId} was aborted during execute: ${plan.abortReason}`);
        plan.state = "executed";
        const n = plan.role === "src" ? plan.srcBlocks.length : plan.reserved.length;
        if (plan.role === "src") (this.counters.sentBlocks += n), (this.counters.sentBytes += bytes);
        else (this.counters.receivedBlocks += n), (this.counters.receivedBytes += bytes);
        return this.#ack(plan.planId, phase, true, { bytes, elapsedMs: performance.now() - t0 });
      }
      case "publish": {
        if (plan.role !== "dst") return no(`plan ${plan.planId}: publish goes to the destination, rank ${this.#o.rank} is the source`);
        if (plan.state !== "executed") return no(`cannot publish plan ${plan.planId}: it is ${plan.state}`);
        const published = bm.publishReserved(plan.reserved.map((block, i) => ({ block, hash: plan.entries[i]!.hash, parent: plan.entries[i]!.parent })));
        plan.reserved = [];
        // The kept parents now have published children: reclamation cannot take them before those.
        bm.unpinSource(plan.pinned);
        plan.pinned = [];
        plan.published = published;
        plan.state = "published";
        // Published data is valid on its own: a lost control plane must not undo it at the deadline.
        clearTimeout(plan.timer);
        this.counters.published += published.length;
        this.onChange();
        return this.#ack(plan.planId, phase, true, {});
      }
      case "finalize": {
        if (plan.role === "dst") {
          if (plan.state !== "published") return no(`cannot finalize plan ${plan.planId} on the destination: it is ${plan.state}`);
          plan.state = "finalized";
          this.#forgetLater(plan);
          return this.#ack(plan.planId, phase, true, {});
        }
        if (plan.state !== "executed") return no(`cannot finalize plan ${plan.planId} on the source: it is ${plan.state}`);
        bm.unpinSource(plan.pinned);
        plan.pinned = [];
        this.#stopMoving(plan);
        const released = plan.mode === "move" ? bm.reclaimSuffix(plan.srcBlocks) : [];
        plan.state = "finalized";
        clearTimeout(plan.timer);
        this.counters.finalized++;
        this.counters.released += released.length;
        this.#forgetLater(plan);
        this.onChange();
        return this.#ack(plan.planId, phase, true, { released: released.length });
      }
      default:
        return no(`unexpected phase ${phase}`);
    }
  }

  #abort(planId: string, reason: string, byDeadline = false): Promise<TransferAckFields> {
    let plan = this.#plans.get(planId);
    if (!plan) {
      // Remember the id: a prepare arriving after its abort must be refused.
      let signalAborted!: () => void;
      plan = { planId, role: "src", mode: "copy", peer: -1, state: "aborted", abortReason: reason, pinned: [], reserved: [], published: [], srcBlocks: [], entries: [], answers: new Map(), aborted: new Promise((r) => (signalAborted = r)), signalAborted };
      plan.answers.set("prepare", Promise.resolve(this.#ack(planId, "prepare", false, { error: `plan ${planId} was aborted before its prepare: ${reason}` })));
      this.#plans.set(planId, plan);
      this.#forgetLater(plan);
    }
    const cached = plan.answers.get("abort");
    if (cached) return cached;
    const p = plan;
    const answer = (async (): Promise<TransferAckFields> => {
      if (p.state === "finalized") return this.#ack(planId, "abort", false, { error: `plan ${planId} already finalized; nothing to abort` });
      const wasOpen = p.state !== "aborted";
      p.state = "aborted";
      p.abortReason ??= reason;
      p.signalAborted();
      clearTimeout(p.timer);
      this.#stopMoving(p);
      if (byDeadline && wasOpen) this.counters.deadlineAborts++;
      // Never release blocks a scatter may still write.
      this.#o.dataPath.cancel(planId, reason);
      await p.execution;
      const bm = this.#o.blocks;
      if (p.pinned.length > 0) bm.unpinSource(p.pinned);
      if (p.reserved.length > 0) bm.releaseReserved(p.reserved);
      // Undo a publish: blocks nobody references yet go back to free.
      const taken = p.published.length > 0 ? bm.reclaimSuffix(p.published) : [];
      const changed = p.pinned.length + p.reserved.length + taken.length > 0;
      p.pinned = [];
      p.reserved = [];
      p.published = [];
      if (wasOpen) this.counters.aborted++;
      this.#forgetLater(p);
      if (changed) this.onChange();
      return this.#ack(planId, "abort", true, {});
    })().catch((e: Error) => this.#ack(planId, "abort", false, { error: `abort on rank ${this.#o.rank} failed: ${e.message}` }));
    p.answers.set("abort", answer);
    return answer;
  }

  /**
   * Starts a destination's receive at prepare when its path allows (one-sided CUDA IPC): its
   * go-ahead to the source then overlaps the control plane's execute. The receive resolves only
   * after the source's own execute copied, and an abort still waits for it to settle.
   */
  #receiveEarly(plan: LocalPlan): void {
    const path = this.#o.dataPath;
    if (!path.receivesAtPrepare?.(plan.peer)) return;
    plan.receiving = path.receive(jobOf(plan, plan.srcBlocks, plan.reserved));
    plan.execution = plan.receiving.catch(() => {});
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
      if (p !== plan && (p.state === "finalized" || p.state === "aborted") && p.pinned.length + p.reserved.length === 0) {
        this.#plans.delete(id);
        finished--;
      }
    }
  }

  #ack(planId: string, phase: TransferPhaseName, ok: boolean, extra: Partial<TransferAckFields>): TransferAckFields {
    return { planId, phase, rank: this.#o.rank, ok, ...extra };
  }
}

/** The data path's view of a plan's execute. */
function jobOf(plan: LocalPlan, srcBlocks: readonly number[], dstBlocks: readonly number[]): KvTransferJob {
  return { planId: plan.planId, peerRank: plan.peer, srcBlocks: Int32Array.from(srcBlocks), dstBlocks: Int32Array.from(dstBlocks) };
}

/** Re-reads the state after an await (abort may have changed it meanwhile). */
function isAborted(plan: LocalPlan): boolean {
  return plan.state === "aborted";
}
