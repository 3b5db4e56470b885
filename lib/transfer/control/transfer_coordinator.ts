/**
 * Drives transfer plans through the phase table of plan_phases.ts from the control plane: prepare
 * (both sides) -> execute (both) -> publish (destination) -> finalize (source, then destination),
 * or abort (both) when any answer is a refusal, a message fails, a hook injects a fault, or the
 * plan's deadline passes. On data paths that allow it (pipelinePhases) execute and publish go out
 * right behind prepare; the workers run them in order, and the acks are still checked phase by
 * phase. While a plan runs it keeps itself in the {@link RunningPlans} indexes (in-flight markers
 * in the global block manager, blocks arriving and leaving, busy pairs).
 * Plan ids are unique per control-plane incarnation; starting a known id returns its outcome. A
 * plan that passes its deadline tells the cost model it cost at least that long, so a data path
 * slower than its estimate stops being admitted instead of timing out plan after plan.
 * Time comes from the injected clock: deadlines are wall-clock (the workers check them too),
 * durations monotonic.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import { type Clock, realClock, settleOrReject } from "../../core/clock.ts";
import { keepAwakeWhile } from "../../runtime/keep_awake.ts";
import type { GlobalBlockManager } from "../../global/global_block_manager.ts";
import {
  type CoordinatorPhase,
  DeadlineFailure,
  PhaseFailure,
  type PhaseMessage,
  PLAN_PHASES,
  type PlanOutcome,
  type PlanRun,
  type TransferAck,
} from "./plan_phases.ts";
import { type InboundPlan, type RunningPlan, RunningPlans } from "./running_plans.ts";
import { TransferLatencyLog } from "./transfer_latency_log.ts";
import type { TransferCostModel } from "./transfer_cost_model.ts";
import type { PlanCandidate, TransferPlan } from "./transfer_plan.ts";

export type { CoordinatorPhase, PhaseMessage, PlanOutcome, TransferAck } from "./plan_phases.ts";
export type { InboundPlan } from "./running_plans.ts";

/** Sends a phase message to a worker and resolves with its ack (rejects on a lost connection or timeout). */
export type TransferLink = (rank: number, message: PhaseMessage, timeoutMs: number) => Promise<TransferAck>;

/** Options of a {@link TransferCoordinator}. */
export interface TransferCoordinatorOptions {
  blocks: GlobalBlockManager;
  link: TransferLink;
  cost: TransferCostModel;
  /** Prefix of plan ids (e.g. the control plane's epoch). */
  idPrefix?: string;
  /** Time and timers (default the real clock); plan deadlines are its wallNow(). */
  clock?: Clock;
  /**
   * Keeps the process's event loop turning while plans run, so acks are read as they land
   * (default: lib/runtime/keep_awake.ts on the real clock; nothing on any other clock, whose plans
   * wait on no socket).
   */
  keepAwake?: (active: () => boolean, maxMs: number) => void;
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
/** Outcomes remembered for repeated plan ids. */
const KNOWN_OUTCOMES = 4096;

/** Runs plans; one instance per control plane. */
export class TransferCoordinator {
  readonly #o: TransferCoordinatorOptions;
  readonly #clock: Clock;
  readonly #keepAwake: (active: () => boolean, maxMs: number) => void;
  readonly #outcomes = new Map<string, Promise<PlanOutcome>>();
  readonly #running: RunningPlans;
  readonly #counters = new Map<string, number>();
  /** Dispatch-to-publish times of recent completed plans. */
  readonly latency = new TransferLatencyLog();
  #nextId = 0;

  constructor(o: TransferCoordinatorOptions) {
    this.#o = o;
    this.#clock = o.clock ?? realClock;
    this.#keepAwake = o.keepAwake ?? (this.#clock === realClock ? keepAwakeWhile : () => {});
    this.#running = new RunningPlans(o.blocks);
  }

  /** Plans running now. */
  get activePlans(): number {
    return this.#running.size;
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
    return this.#running.isInbound(rank, hash);
  }

  /** Blocks running plans bring to `rank`. */
  inboundBlocks(rank: number): number {
    return this.#running.inboundBlocks(rank);
  }

  /** Running plans bringing any of `hashes` to `rank`, each with how many of those hashes it brings. */
  inboundPlans(rank: number, hashes: readonly BlockHash[]): (InboundPlan & { blocks: number })[] {
    return this.#running.inboundPlans(rank, hashes);
  }

  /** A running move takes `hash` away from `rank`. */
  isMovingOut(rank: number, hash: BlockHash): boolean {
    return this.#running.isMovingOut(rank, hash);
  }

  /** A plan runs between `a` and `b`, in either direction. */
  pairBusy(a: number, b: number): boolean {
    return this.#running.pairBusy(a, b);
  }

  /**
   * Resolves true once both sides accepted `planId`'s prepare (the source's blocks are pinned, so
   * the source cannot reclaim them any more), false when the plan ended before or is unknown.
   */
  prepared(planId: string): Promise<boolean> {
    return this.#running.prepared(planId);
  }

  /** The outcome of a started plan id. */
  outcome(planId: string): Promise<PlanOutcome> | undefined {
    return this.#outcomes.get(planId);
  }

  /** Gives `candidate` an id and a deadline `deadlineMs` from now, and runs it. */
  start(candidate: PlanCandidate, deadlineMs: number): { plan: TransferPlan; done: Promise<PlanOutcome> } {
    const plan: TransferPlan = {
      ...candidate,
      planId: `${this.#o.idPrefix ?? "p"}-${++this.#nextId}`,
      deadline: this.#clock.wallNow() + deadlineMs,
    };
    return { plan, done: this.run(plan) };
  }

  /** Runs a plan with its own id (idempotent per id). Never rejects. */
  run(plan: TransferPlan): Promise<PlanOutcome> {
    const known = this.#outcomes.get(plan.planId);
    if (known) return known;
    if (plan.src === plan.dst) throw new RangeError(`plan ${plan.planId} has source and destination rank ${plan.src}`);
    if (plan.blocks.length === 0) throw new RangeError(`plan ${plan.planId} has no blocks`);
    const { promise: done, resolve } = Promise.withResolvers<PlanOutcome>();
    this.#outcomes.set(plan.planId, done);
    if (this.#outcomes.size > KNOWN_OUTCOMES) this.#outcomes.delete(this.#outcomes.keys().next().value!);
    const entry = this.#running.enter(plan, done, this.#clock.now());
    // Acks then get read as they land, not after a wake-up of this process (lib/runtime/keep_awake.ts).
    this.#keepAwake(
      () => this.#running.size > 0,
      Math.min(Math.max(1, plan.deadline - this.#clock.wallNow()), PLAN_AWAKE_MAX_MS),
    );
    this.count("transfer_started");
    // The plan starts after run() returned; it leaves the indexes before anyone sees its outcome.
    void Promise.resolve()
      .then(() => this.#drive(entry))
      .catch((e: Error): PlanOutcome => ({
        plan,
        status: "aborted",
        reason: `the coordinator failed: ${e.message}`,
        bytes: 0,
        released: 0,
      }))
      .then((outcome) => {
        entry.leave();
        resolve(outcome);
      });
    return done;
  }

  async #drive(entry: RunningPlan): Promise<PlanOutcome> {
    const { plan } = entry.record;
    const { src, dst } = plan;
    const srcEpoch = this.#o.blocks.table(src)?.epoch;
    const dstEpoch = this.#o.blocks.table(dst)?.epoch;
    const run: PlanRun = {
      plan,
      srcEpoch: srcEpoch ?? -1,
      dstEpoch: dstEpoch ?? -1,
      now: () => this.#clock.now(),
      t0: this.#clock.now(),
      onPrepared: () => entry.markPrepared(),
      phase: "prepare",
      bytes: 0,
      released: 0,
    };
    const trace: PlanTrace | undefined = this.#o.trace ? { t0: run.t0, lines: [] } : undefined;
    try {
      if (srcEpoch === undefined || dstEpoch === undefined) {
        throw new PhaseFailure(`rank ${srcEpoch === undefined ? src : dst} is not healthy`);
      }
      await this.#walk(run, trace);
      const publishMs = run.publishMs!;
      this.#o.cost.observe(src, dst, plan.blocks.length, {
        sourceMs: run.sourceMs,
        publishMs,
        waitMs: this.#waitedMs(plan),
      });
      // The pair's path as its workers last reported it: which data path the plan ran on.
      const path = this.#o.cost.paths.nameOf(src, dst);
      this.count("transfer_completed");
      this.count(`transfer_${plan.kind}_completed`);
      this.count(`transfer_path_${path}_completed`);
      this.count("transfer_blocks", plan.blocks.length);
      this.count("transfer_bytes", run.bytes);
      this.count("transfer_released_blocks", run.released);
      this.latency.record(plan.blocks.length, publishMs, {
        prepareMs: run.preparedAt! - run.t0,
        executeMs: run.executedAt! - run.preparedAt!,
      });
      if (trace) {
        const what = `${plan.planId} ${plan.kind} ${plan.blocks.length} blocks ${src}->${dst} over ${path}`;
        this.#o.trace!(`[transfer-trace] ${what}: publish ${publishMs.toFixed(3)} ms; ${trace.lines.join("; ")}`);
      }
      return { plan, status: "completed", bytes: run.bytes, publishMs, released: run.released };
    } catch (e) {
      const reason = (e as Error).message;
      const { phase } = run;
      const timedOut = e instanceof DeadlineFailure;
      // Ran out of time: it costs at least this much, so the cost gate stops admitting its like.
      if (timedOut) {
        this.#o.cost.observeTimeout(src, dst, plan.blocks.length, this.#clock.now() - run.t0, this.#waitedMs(plan));
      }
      await this.#abortBoth(plan, `${phase} failed: ${reason}`);
      this.count("transfer_aborted");
      this.count(`transfer_abort_${phase}`);
      if (timedOut) this.count("transfer_deadline_aborts");
      return {
        plan,
        status: "aborted",
        failedPhase: phase,
        reason,
        bytes: run.bytes,
        publishMs: run.publishMs,
        released: run.released,
      };
    }
  }

  /**
   * Walks PLAN_PHASES: sends each row (on a pipelined pair, with the rows that may go ahead of its
   * acks right behind it) and checks its acks in order. Throws at the first failure of a row that
   * aborts; a row past the commit point only logs.
   */
  async #walk(run: PlanRun, trace: PlanTrace | undefined): Promise<void> {
    const { plan } = run;
    const pipelined = this.#o.pipelinePhases?.(plan.src, plan.dst) ?? true;
    const sent: Promise<TransferAck[]>[] = [];
    const send = async (i: number): Promise<void> => {
      const step = PLAN_PHASES[i]!;
      run.phase = step.phase;
      const hook = this.#o.beforePhase;
      if (hook && step.hooked) await hook(plan, step.phase);
      const acks = this.#all(plan, step.to(plan), step.message(run), step.traced ? trace : undefined);
      acks.catch(() => {}); // checked in order below; a failure found first elsewhere must not leave it unhandled
      sent[i] = acks;
    };
    for (const [i, step] of PLAN_PHASES.entries()) {
      try {
        if (!sent[i]) await send(i);
        for (let j = i + 1; pipelined && j < PLAN_PHASES.length && PLAN_PHASES[j]!.sendsAhead && !sent[j]; j++) {
          await send(j);
        }
        run.phase = step.phase;
        step.check(await sent[i]!, run);
      } catch (e) {
        if (step.undo === "abort-both") throw e;
        this.#log(
          `[transfer] plan ${plan.planId}: ${step.phase} on rank ${
            step.to(plan).join(", ")
          } failed (plan stays committed): ${(e as Error).message}`,
        );
      }
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
  async #all(
    plan: TransferPlan,
    ranks: readonly number[],
    message: PhaseMessage,
    trace?: PlanTrace,
  ): Promise<TransferAck[]> {
    const clock = this.#clock;
    const left = plan.deadline - clock.wallNow();
    if (left <= 0) throw new DeadlineFailure(`plan ${plan.planId} passed its deadline before ${message.type}`);
    // The first refusal fails the phase at once (a receiver would otherwise wait for the deadline).
    const sentAt = clock.now();
    const acked: string[] = [];
    const checked = ranks.map((r) =>
      // The link may outlive the deadline race, so a late ack still finds its request.
      this.#o.link(r, message, left + (this.#o.abortTimeoutMs ?? 2000)).then((ack) => {
        if (trace) {
          acked.push(
            `r${r} ${(clock.now() - sentAt).toFixed(3)} (${ackTiming(ack, clock.timeOrigin + sentAt, clock)})`,
          );
        }
        if (!ack.ok) {
          throw new PhaseFailure(
            `rank ${ack.rank} refused ${message.type}: ${ack.error ?? "no reason given"}`,
          );
        }
        return ack;
      })
    );
    const acks = await settleOrReject(
      Promise.all(checked),
      left,
      () => new DeadlineFailure(`plan ${plan.planId} passed its deadline during ${message.type}`),
      clock,
    );
    trace?.lines.push(
      `${message.type.slice("transfer_".length)} sent +${(sentAt - trace.t0).toFixed(3)}: ${acked.join(", ")}`,
    );
    return acks;
  }

  async #abortBoth(plan: TransferPlan, reason: string): Promise<void> {
    const timeout = this.#o.abortTimeoutMs ?? 2000;
    const msg = { type: "transfer_abort", planId: plan.planId, reason } as const;
    const bounded = (r: number) =>
      settleOrReject(
        this.#o.link(r, msg, timeout),
        timeout,
        () => new Error(`no abort ack within ${timeout} ms`),
        this.#clock,
      );
    const results = await Promise.allSettled([plan.src, plan.dst].map(bounded));
    // A worker that does not answer aborts the plan itself at its deadline.
    results.forEach((r, i) => {
      if (r.status === "rejected") {
        this.#log(
          `[transfer] plan ${plan.planId}: abort on rank ${[plan.src, plan.dst][i]} got no answer (${
            (r.reason as Error).message
          }); its deadline frees the blocks`,
        );
      }
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

/**
 * The worker's part of one ack's round trip for the trace: its handling time, and when it says when
 * it read the message, the way there and back ("?" when the ack carries no timing).
 */
function ackTiming(ack: TransferAck, sentAtEpoch: number, clock: Clock): string {
  if (ack.handledMs === undefined) return "?";
  const handled = ack.handledMs.toFixed(3);
  if (ack.receivedAt === undefined) return handled;
  const there = ack.receivedAt - sentAtEpoch;
  const back = clock.timeOrigin + clock.now() - ack.receivedAt - ack.handledMs;
  return `${handled}; there ${there.toFixed(3)}, back ${back.toFixed(3)}`;
}
