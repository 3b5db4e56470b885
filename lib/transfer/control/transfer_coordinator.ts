/**
 * Drives transfer plans through their phases from the control plane: prepare (both sides) ->
 * execute (both) -> publish (destination) -> finalize (source, then destination), or abort (both)
 * when any answer is a refusal, a message fails, a hook injects a fault, or the plan's deadline
 * passes. On data paths that allow it (pipelinePhases) execute and publish go out right behind
 * prepare; the workers run them in order, and the acks are still checked phase by phase. While a
 * plan runs, in-flight markers in the global block manager keep its source blocks out of reclaim
 * accounting, and the coordinator knows which blocks are arriving where (so plans do not duplicate
 * each other) and which are leaving (so nothing plans on blocks a move releases).
 * Plan ids are unique per control-plane incarnation; starting a known id returns its outcome. A
 * plan that passes its deadline tells the cost model it cost at least that long, so a data path
 * slower than its estimate stops being admitted instead of timing out plan after plan.
 *
 * The source finalizes before the destination: once the source committed (a move released its
 * blocks) nothing undoes the destination's copy.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import type { MessageOf } from "../../protocol/messages.ts";
import { keepAwakeWhile } from "../../runtime/keep_awake.ts";
import type { GlobalBlockManager } from "../../global/global_block_manager.ts";
import { TransferLatencyLog } from "./transfer_latency_log.ts";
import type { TransferCostModel } from "./transfer_cost_model.ts";
import type { PlanCandidate, TransferPlan } from "./transfer_plan.ts";
// The phase messages register themselves with the codec when this module loads.
import "../transfer_messages.ts";

/** The fields of a worker's transfer_ack. */
export type TransferAck = Omit<MessageOf<"transfer_ack">, "type" | "id" | "replyTo">;
/** A phase message as the coordinator sends it. */
export type PhaseMessage =
  | Omit<MessageOf<"transfer_prepare">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_execute">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_publish">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_finalize">, "id" | "replyTo">
  | Omit<MessageOf<"transfer_abort">, "id" | "replyTo">;
/** Sends a phase message to a worker and resolves with its ack (rejects on a lost connection or timeout). */
export type TransferLink = (rank: number, message: PhaseMessage, timeoutMs: number) => Promise<TransferAck>;
/** Phases the coordinator drives. */
export type CoordinatorPhase = "prepare" | "execute" | "publish" | "finalize";

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

/** A running plan that brings blocks to a rank. */
export interface InboundPlan {
  plan: TransferPlan;
  done: Promise<PlanOutcome>;
  /** When it started (the coordinator's clock, ms). */
  startedAt: number;
}

/** Options of a {@link TransferCoordinator}. */
export interface TransferCoordinatorOptions {
  blocks: GlobalBlockManager;
  link: TransferLink;
  cost: TransferCostModel;
  /** Prefix of plan ids (e.g. the control plane's epoch). */
  idPrefix?: string;
  /** Wall clock of deadlines (default Date.now). */
  now?: () => number;
  /** How long abort messages may take (default 2000 ms). */
  abortTimeoutMs?: number;
  /**
   * Whether a plan from `src` to `dst` sends execute and publish right behind prepare instead of
   * after the acks of the phase before (default: always). The workers run a plan's phases in order
   * anyway, and the destination names its reserved blocks to a one-sided source itself, so a plan
   * costs one control round trip per worker instead of three; the acks are still checked phase by
   * phase, and any failure aborts. Only for data paths where a source that runs ahead of a
   * refusing destination wastes nothing it cannot take back (CUDA IPC waits for the destination's
   * `ready`, a host payload is dropped); not for NCCL, whose send would wait for a receive that
   * never comes.
   */
  pipelinePhases?: (src: number, dst: number) => boolean;
  /**
   * Test hook run before each phase is sent (pipelined: all three before the first ack is awaited);
   * throwing aborts the plan there.
   */
  beforePhase?: (plan: TransferPlan, phase: CoordinatorPhase) => void | Promise<void>;
  log?: (line: string) => void;
  /**
   * Gets one line per completed plan with each phase's timings: when it was sent after the plan
   * started and, per rank, the ack's round trip and (in brackets) the worker's own handling time
   * and, split by the time the worker read the message, the way there and back, so transport and
   * event-loop delays show on each side.
   * LMPOOL_TRACE_TRANSFERS=1 turns it on in the control plane.
   */
  trace?: (line: string) => void;
}

/** Longest the coordinator's event loop keeps turning for running plans without a pause. */
const PLAN_AWAKE_MAX_MS = 5000;

class PhaseFailure extends Error {
  override readonly name: string = "PhaseFailure";
}

/** The plan's deadline passed before a phase ended. */
class DeadlineFailure extends PhaseFailure {
  override readonly name = "DeadlineFailure";
}

/** Runs plans; one instance per control plane. */
export class TransferCoordinator {
  readonly #o: TransferCoordinatorOptions;
  readonly #now: () => number;
  readonly #plans = new Map<string, Promise<PlanOutcome>>();
  /** Running plans: resolves true once both sides accepted prepare (the source pinned its blocks). */
  readonly #prepared = new Map<string, { promise: Promise<boolean>; resolve: (ok: boolean) => void }>();
  readonly #inbound = new Map<number, Map<BlockHash, InboundPlan>>();
  readonly #movingOut = new Set<string>();
  readonly #pairs = new Map<string, number>();
  readonly #counters = new Map<string, number>();
  /** Dispatch-to-publish times of recent completed plans. */
  readonly latency = new TransferLatencyLog();
  #nextId = 0;
  #active = 0;

  constructor(o: TransferCoordinatorOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  /** Plans running now. */
  get activePlans(): number {
    return this.#active;
  }

  /** transfer_* counters, and the transfer_publish_* summary of recent plans. */
  counters(): Record<string, number> {
    return { ...Object.fromEntries(this.#counters), ...this.latency.counters() };
  }

  /** Adds to a counter. */
  count(key: string, n = 1): void {
    this.#counters.set(key, (this.#counters.get(key) ?? 0) + n);
  }

  /** A running plan brings `hash` to `rank`. */
  isInbound(rank: number, hash: BlockHash): boolean {
    return this.#inbound.get(rank)?.has(hash) ?? false;
  }

  /** Running plans bringing any of `hashes` to `rank`, each with how many of those hashes it brings. */
  inboundPlans(rank: number, hashes: readonly BlockHash[]): (InboundPlan & { blocks: number })[] {
    const m = this.#inbound.get(rank);
    if (!m) return [];
    const out = new Map<InboundPlan, number>();
    for (const h of hashes) {
      const p = m.get(h);
      if (p) out.set(p, (out.get(p) ?? 0) + 1);
    }
    return [...out].map(([p, blocks]) => ({ ...p, blocks }));
  }

  /** A running move takes `hash` away from `rank`. */
  isMovingOut(rank: number, hash: BlockHash): boolean {
    return this.#movingOut.has(`${rank}:${hash}`);
  }

  /** A plan runs between `a` and `b`, in either direction. */
  pairBusy(a: number, b: number): boolean {
    return (this.#pairs.get(pairName(a, b)) ?? 0) > 0;
  }

  /**
   * Resolves true once both sides accepted `planId`'s prepare (the source's blocks are pinned, so
   * the source cannot reclaim them any more), false when the plan ended before or is unknown.
   */
  prepared(planId: string): Promise<boolean> {
    return this.#prepared.get(planId)?.promise ?? Promise.resolve(false);
  }

  /** The outcome of a started plan id. */
  outcome(planId: string): Promise<PlanOutcome> | undefined {
    return this.#plans.get(planId);
  }

  /** Gives `candidate` an id and a deadline `deadlineMs` from now, and runs it. */
  start(candidate: PlanCandidate, deadlineMs: number): { plan: TransferPlan; done: Promise<PlanOutcome> } {
    const plan: TransferPlan = { ...candidate, planId: `${this.#o.idPrefix ?? "p"}-${++this.#nextId}`, deadline: this.#now() + deadlineMs };
    return { plan, done: this.run(plan) };
  }

  /** Runs a plan with its own id (idempotent per id). Never rejects. */
  run(plan: TransferPlan): Promise<PlanOutcome> {
    const known = this.#plans.get(plan.planId);
    if (known) return known;
    if (plan.src === plan.dst) throw new RangeError(`plan ${plan.planId} has source and destination rank ${plan.src}`);
    if (plan.blocks.length === 0) throw new RangeError(`plan ${plan.planId} has no blocks`);
    let resolvePrepared!: (ok: boolean) => void;
    this.#prepared.set(plan.planId, { promise: new Promise<boolean>((r) => (resolvePrepared = r)), resolve: resolvePrepared });
    const done = this.#drive(plan);
    this.#plans.set(plan.planId, done);
    if (this.#plans.size > 4096) this.#plans.delete(this.#plans.keys().next().value!);
    const inbound = this.#inbound.get(plan.dst) ?? new Map<BlockHash, InboundPlan>();
    this.#inbound.set(plan.dst, inbound);
    const record: InboundPlan = { plan, done, startedAt: this.#now() };
    for (const b of plan.blocks) inbound.set(b.hash, record);
    if (plan.mode === "move") for (const b of plan.blocks) this.#movingOut.add(`${plan.src}:${b.hash}`);
    const pair = pairName(plan.src, plan.dst);
    this.#pairs.set(pair, (this.#pairs.get(pair) ?? 0) + 1);
    this.#o.blocks.lockInFlight(plan.planId, plan.src, plan.blocks.map((b) => b.hash));
    this.#active++;
    // Acks then get read as they land, not after a wake-up of this process (lib/runtime/keep_awake.ts).
    keepAwakeWhile(() => this.#active > 0, Math.min(Math.max(1, plan.deadline - this.#now()), PLAN_AWAKE_MAX_MS));
    this.count("transfer_started");
    void done.then(() => {
      resolvePrepared(false); // no-op once prepared
      this.#prepared.delete(plan.planId);
      this.#active--;
      this.#o.blocks.unlockInFlight(plan.planId);
      for (const b of plan.blocks) if (inbound.get(b.hash) === record) inbound.delete(b.hash);
      if (plan.mode === "move") for (const b of plan.blocks) this.#movingOut.delete(`${plan.src}:${b.hash}`);
      const n = (this.#pairs.get(pair) ?? 1) - 1;
      if (n <= 0) this.#pairs.delete(pair);
      else this.#pairs.set(pair, n);
    });
    return done;
  }

  async #drive(plan: TransferPlan): Promise<PlanOutcome> {
    await Promise.resolve(); // let run() record the plan's markers first
    const { src, dst, planId } = plan;
    const t0 = performance.now();
    let phase: CoordinatorPhase = "prepare";
    let bytes = 0;
    let publishMs: number | undefined;
    let released = 0;
    const trace: PlanTrace | undefined = this.#o.trace ? { t0, lines: [] } : undefined;
    try {
      const srcEpoch = this.#o.blocks.table(src)?.epoch;
      const dstEpoch = this.#o.blocks.table(dst)?.epoch;
      if (srcEpoch === undefined || dstEpoch === undefined) throw new PhaseFailure(`rank ${srcEpoch === undefined ? src : dst} is not healthy`);
      const hook = this.#o.beforePhase;
      if (hook) await hook(plan, "prepare");
      const prepare = { type: "transfer_prepare", planId, mode: plan.mode, srcRank: src, dstRank: dst, srcEpoch, dstEpoch, blocks: plan.blocks, deadline: plan.deadline } as const;
      const srcBlocks = plan.blocks.map((b) => b.srcBlock);
      // Execute names the destination's blocks once prepare reserved them (pipelined: not yet).
      const execute = (dstBlocks?: number[]) => ({ type: "transfer_execute", planId, srcRank: src, dstRank: dst, srcBlocks, ...(dstBlocks ? { dstBlocks } : {}) }) as const;
      const publish = { type: "transfer_publish", planId } as const;
      const pipelined = this.#o.pipelinePhases?.(src, dst) ?? true;
      // The destination's prepare goes first: its answer (and, on CUDA IPC, its go-ahead to the
      // source) starts the plan's critical path; the source's execute follows its prepare.
      const prepared = this.#all(plan, [dst, src], prepare, trace);
      let executed: Promise<TransferAck[]> | undefined;
      let published: Promise<TransferAck[]> | undefined;
      if (pipelined) {
        prepared.catch(() => {}); // awaited below; a hook throwing first must not leave it unhandled
        phase = "execute";
        if (hook) await hook(plan, phase);
        executed = this.#all(plan, [src, dst], execute(), trace);
        executed.catch(() => {});
        phase = "publish";
        if (hook) await hook(plan, phase);
        published = this.#all(plan, [dst], publish, trace);
        published.catch(() => {});
      }
      phase = "prepare";
      const dstPrep = (await prepared)[0]!;
      const dstBlocks = dstPrep.dstBlocks ?? [];
      if (dstBlocks.length !== plan.blocks.length) throw new PhaseFailure(`destination reserved ${dstBlocks.length} blocks for a ${plan.blocks.length}-block plan`);
      this.#prepared.get(planId)?.resolve(true);
      const preparedAt = performance.now();
      phase = "execute";
      if (!executed) {
        if (hook) await hook(plan, phase);
        executed = this.#all(plan, [src, dst], execute(dstBlocks), trace);
      }
      const srcExec = (await executed)[0]!;
      bytes = srcExec.bytes ?? 0;
      const executedAt = performance.now();
      phase = "publish";
      if (!published) {
        if (hook) await hook(plan, phase);
        published = this.#all(plan, [dst], publish, trace);
      }
      await published;
      publishMs = performance.now() - t0;
      phase = "finalize";
      if (hook) await hook(plan, phase);
      const srcFin = (await this.#all(plan, [src], { type: "transfer_finalize", planId, mode: plan.mode }))[0]!;
      released = srcFin.released ?? 0;
      // Committed: the destination's finalize is bookkeeping; its failure undoes nothing.
      await this.#all(plan, [dst], { type: "transfer_finalize", planId, mode: plan.mode }).catch((e: Error) => this.#log(`[transfer] plan ${planId}: destination finalize failed (plan stays committed): ${e.message}`));
      this.#o.cost.observe(src, dst, plan.blocks.length, { sourceMs: srcExec.elapsedMs, publishMs, waitMs: this.#waitedMs(plan) });
      this.count("transfer_completed");
      this.count(`transfer_${plan.kind}_completed`);
      this.count("transfer_blocks", plan.blocks.length);
      this.count("transfer_bytes", bytes);
      this.count("transfer_released_blocks", released);
      this.latency.record(plan.blocks.length, publishMs, { prepareMs: preparedAt - t0, executeMs: executedAt - preparedAt });
      if (trace) this.#o.trace!(`[transfer-trace] ${planId} ${plan.kind} ${plan.blocks.length} blocks ${src}->${dst}: publish ${publishMs.toFixed(3)} ms; ${trace.lines.join("; ")}`);
      return { plan, status: "completed", bytes, publishMs, released };
    } catch (e) {
      const reason = (e as Error).message;
      const timedOut = e instanceof DeadlineFailure;
      // Ran out of time: it costs at least this much, so the cost gate stops admitting its like.
      if (timedOut) this.#o.cost.observeTimeout(src, dst, plan.blocks.length, performance.now() - t0, this.#waitedMs(plan));
      await this.#abortBoth(plan, `${phase} failed: ${reason}`);
      this.count("transfer_aborted");
      this.count(`transfer_abort_${phase}`);
      if (timedOut) this.count("transfer_deadline_aborts");
      return { plan, status: "aborted", failedPhase: phase, reason, bytes, publishMs, released };
    }
  }

  /**
   * The phase wait an ended plan counts as waiting, not as transfer cost: the larger of the wait
   * predicted at dispatch and the ranks' wait now, so a plan caught by a busy spell does not teach
   * its size bucket a transfer cost that then refuses every later copy of that size.
   */
  #waitedMs(plan: TransferPlan): number {
    return Math.max(plan.waitMs ?? 0, this.#o.cost.phaseWaitMs(plan.src, plan.dst));
  }

  /** Sends one phase to `ranks` at once; every ack must be ok, before the plan's deadline. */
  async #all(plan: TransferPlan, ranks: number[], message: PhaseMessage, trace?: PlanTrace): Promise<TransferAck[]> {
    const left = plan.deadline - this.#now();
    if (left <= 0) throw new DeadlineFailure(`plan ${plan.planId} passed its deadline before ${message.type}`);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineFailure(`plan ${plan.planId} passed its deadline during ${message.type}`)), left);
    });
    try {
      // The first refusal fails the phase at once (a receiver would otherwise wait for the deadline).
      const sentAt = performance.now();
      const sentAtEpoch = performance.timeOrigin + sentAt;
      const acked: string[] = [];
      const checked = ranks.map((r) =>
        // The link may outlive the deadline race, so a late ack still finds its request.
        this.#o.link(r, message, left + (this.#o.abortTimeoutMs ?? 2000)).then((ack) => {
          if (trace) acked.push(`r${r} ${(performance.now() - sentAt).toFixed(3)} (${ackTiming(ack, sentAtEpoch)})`);
          if (!ack.ok) throw new PhaseFailure(`rank ${ack.rank} refused ${message.type}: ${ack.error ?? "no reason given"}`);
          return ack;
        }),
      );
      const acks = await Promise.race([Promise.all(checked), deadline]);
      trace?.lines.push(`${message.type.slice("transfer_".length)} sent +${(sentAt - trace.t0).toFixed(3)}: ${acked.join(", ")}`);
      return acks;
    } finally {
      clearTimeout(timer);
    }
  }

  async #abortBoth(plan: TransferPlan, reason: string): Promise<void> {
    const timeout = this.#o.abortTimeoutMs ?? 2000;
    const msg = { type: "transfer_abort", planId: plan.planId, reason } as const;
    const bounded = (r: number) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expire = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no abort ack within ${timeout} ms`)), timeout)));
      return Promise.race([this.#o.link(r, msg, timeout), expire]).finally(() => clearTimeout(timer));
    };
    const results = await Promise.allSettled([plan.src, plan.dst].map(bounded));
    // A worker that does not answer aborts the plan itself at its deadline.
    results.forEach((r, i) => {
      if (r.status === "rejected") this.#log(`[transfer] plan ${plan.planId}: abort on rank ${[plan.src, plan.dst][i]} got no answer (${(r.reason as Error).message}); its deadline frees the blocks`);
    });
  }

  #log(line: string): void {
    (this.#o.log ?? ((l: string) => console.error(l)))(line);
  }
}

/** A plan's phase trace: when the plan started, and a line per phase. */
interface PlanTrace {
  t0: number;
  lines: string[];
}

function pairName(a: number, b: number): string {
  return a < b ? `${a}-${b}` : `${b}-${a}`;
}

/**
 * The worker's part of one ack's round trip for the trace: its handling time, and when it says when
 * it read the message, the way there and back ("?" when the ack carries no timing).
 */
function ackTiming(ack: TransferAck, sentAtEpoch: number): string {
  if (ack.handledMs === undefined) return "?";
  const handled = ack.handledMs.toFixed(3);
  if (ack.receivedAt === undefined) return handled;
  const there = ack.receivedAt - sentAtEpoch;
  const back = performance.timeOrigin + performance.now() - ack.receivedAt - ack.handledMs;
  return `${handled}; there ${there.toFixed(3)}, back ${back.toFixed(3)}`;
}
