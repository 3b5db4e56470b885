/**
 * The message loop of one data-plane worker: takes dispatched sequences from the launcher, steps
 * its LocalEngine, streams token deltas and finishes back, and reports versioned block snapshots
 * and deltas (with the request ids they reflect) to the control plane, reconnecting to a restarted
 * control plane and resending a full snapshot. Steps run through LocalEngine.stepAsync: on CUDA the
 * device computes a step while this thread reads messages (transfer phases, dispatches), so a
 * phase never waits for a step to end; on the CPU a step holds the thread and messages wait.
 * @module
 */
import type { RankStats } from "../core/engine_api.ts";
import { Sequence } from "../core/sequence.ts";
import type { StreamDelta } from "../core/outputs.ts";
import { Connection } from "../protocol/connection.ts";
import type { Message, MessageOf } from "../protocol/messages.ts";
import type { TokenDeltaItem } from "../protocol/runtime_messages.ts";
import { connectUnix } from "../runtime/unix_socket.ts";
import { settlesWithin } from "../core/clock.ts";
import { yieldToEventLoop } from "../runtime/event_loop.ts";
import { IdleBlockAudit } from "../local/idle_block_audit.ts";
import { StepWorkTotals } from "../local/step_work.ts";
import { StepLiveness } from "./step_liveness.ts";
import type { WorkerHostOptions } from "./worker_host_options.ts";
import { keepAwakeWhile } from "../runtime/keep_awake.ts";
import { readSetting } from "../runtime/env.ts";
import { appendText } from "../runtime/files.ts";
import type { LocalEngine } from "../local/local_engine.ts";
import { StepWaitEstimator } from "../transfer/worker/step_wait_estimator.ts";
import type { TransferPhaseMessage } from "../transfer/worker/transfer_executor.ts";
import type { z } from "zod";
// Every message family a worker sends or receives registers itself with the codec on import.
import "../transfer/transfer_messages.ts";
import "../transfer/paths/ipc/ipc_messages.ts";
import "../transfer/paths/nccl/nccl_messages.ts";

/** Longest a worker holds its next step for a transfer payload in flight (see #run). */
const PAYLOAD_PAUSE_MAX_MS = 50;
/** Longest an exit waits for the step on the device to end. */
const EXIT_STEP_WAIT_MS = 5000;
/** Longest a plan keeps this worker's event loop turning (a plan normally ends within milliseconds). */
const PLAN_AWAKE_MAX_MS = 2000;
/** Longest a block change of a plan still open here waits to be reported (see #afterTransferChange). */
const TRANSFER_REPORT_HOLD_MAX_MS = 5;
/** One worker's event loop around its engine. */
export class WorkerHost {
  readonly #o: WorkerHostOptions;
  readonly #engine: LocalEngine;
  readonly #log: (line: string) => void;
  readonly #held = new Map<string, Sequence>();
  /** Constrained requests waiting for the grammar engine to load. */
  readonly #grammarWaits = new Set<string>();
  /** Requests queued / given blocks since the last report to the control plane. */
  #queued: string[] = [];
  #awaitingBlocks = new Set<string>();
  #allocated: string[] = [];
  #control: Connection | undefined;
  #loop: Promise<void> | undefined;
  #transferChangePending = false;
  /** Bounds how long a change made by a still-open plan goes unreported. */
  #transferReportHold: ReturnType<typeof setTimeout> | undefined;
  #lastStatsShape = "";
  #lastStats = 0;
  #exiting = false;
  /** Step wall times, for the step_wait_ms the control plane's cost model prices phase waits with. */
  readonly #stepWait = new StepWaitEstimator();
  /** True while #run steps the engine (on the CPU, control messages then wait for the current step to end). */
  #stepping = false;
  /** Longest recent step wall time, decaying: what the next step is expected to take at most. */
  readonly #liveness: StepLiveness;
  /** Blocks found still held when the worker last went idle (a leak), and invariant violations seen. */
  readonly #audit = new IdleBlockAudit();
  /** LMPOOL_TRACE_STEPS: the file each step's line is appended to. */
  readonly #stepTrace = readSetting("LMPOOL_TRACE_STEPS");
  /** When the previous step ended (the trace's gap between steps). */
  #lastStepEnd: number | undefined;
  /** Work and native time of pure prefill and decode steps (the control plane's speed estimate). */
  readonly #stepTotals = new StepWorkTotals();

  constructor(o: WorkerHostOptions) {
    this.#o = o;
    this.#engine = o.engine;
    this.#liveness = new StepLiveness(!o.engine.readsMessagesDuringSteps);
    this.#log = o.log ?? ((l) => console.error(l));
    o.launcher.onMessage((m) => this.#fromLauncher(m));
    o.launcher.onClose(({ reason }) => this.#exit(0, `launcher connection ended (${reason})`));
    if (o.transfers) o.transfers.onChange = () => this.#afterTransferChange();
    if (o.dataPath) {
      o.dataPath.onFallback = (peerRank, reason) =>
        void this.#control?.send({ type: "nccl_pair_status", rank: o.rank, peerRank, ok: false, error: reason });
    }
    void this.#connectControl();
  }

  /** Requests this worker holds. */
  get numRequests(): number {
    return this.#held.size;
  }

  /** True while connected to the control plane. */
  get controlConnected(): boolean {
    return this.#control !== undefined && !this.#control.closed;
  }

  #fromLauncher(m: Message): void {
    switch (m.type) {
      case "dispatch":
        return this.#dispatch(m);
      case "abort": {
        if (this.#grammarWaits.delete(m.requestId)) {
          this.#o.launcher.send({ type: "finish", requestId: m.requestId, reason: "abort", tokenIds: [], text: "" });
          return;
        }
        const d = this.#engine.abort(m.requestId);
        if (d) this.#finish(d);
        return;
      }
      case "stats_request":
        this.#o.launcher.reply(m, {
          type: "stats",
          rank: this.#o.rank,
          counters: this.#rankCounters(this.#engine.rankStats()),
        });
        return;
      case "snapshot_request": {
        // A consistency check: the launcher and the control plane get the same new version.
        const snap = this.#snapshotMessage();
        this.#control?.send(snap);
        if (m.id !== undefined) this.#o.launcher.reply(m, snap);
        return;
      }
      case "shutdown":
        for (const id of [...this.#held.keys()]) {
          const d = this.#engine.abort(id);
          if (d) this.#finish(d);
        }
        return this.#exit(0, "shutdown requested");
      default:
        if (m.id !== undefined) {
          this.#o.launcher.replyError(m, "unexpected", `worker ${this.#o.rank} does not handle ${m.type}`);
        }
    }
  }

  #dispatch(m: MessageOf<"dispatch">): void {
    // The first constrained request loads the grammar engine; it (and any that come meanwhile)
    // waits for it, and an abort meanwhile ends it here.
    if (m.sampling.structuredOutput && !this.#engine.grammars.settled) {
      this.#grammarWaits.add(m.requestId);
      this.#engine.grammars.load().catch(() => {}).finally(() => {
        if (this.#grammarWaits.delete(m.requestId) && !this.#exiting) this.#dispatch(m);
      });
      return;
    }
    try {
      const seq = new Sequence({
        requestId: m.requestId,
        promptTokenIds: m.promptTokenIds,
        params: m.sampling,
        blockSize: this.#engine.blocks.blockSize,
        cacheSalt: m.cacheSalt,
        arrivalTime: m.arrivalTime,
      });
      this.#engine.add(seq, { stream: true });
      this.#held.set(m.requestId, seq);
      this.#queued.push(m.requestId);
      this.#awaitingBlocks.add(m.requestId);
    } catch (e) {
      const err = e as Error;
      this.#o.launcher.send({
        type: "finish",
        requestId: m.requestId,
        reason: "error",
        tokenIds: [],
        text: "",
        error: { name: err.name, message: err.message },
      });
      return;
    }
    this.#loop ??= this.#run();
  }

  async #run(): Promise<void> {
    try {
      await yieldToEventLoop(); // let a burst of dispatches queue up before the first step
      // Tell the control plane at once that phase messages now wait for steps, not after the first
      // (often the longest, a prefill) ends.
      this.#stepping = this.#engine.hasWork && !this.#exiting;
      if (this.#stepping) this.#report();
      while (this.#engine.hasWork && !this.#exiting) {
        this.#announceBusyStep();
        const t0 = performance.now();
        const watchdog = this.#watchStep();
        let report;
        try {
          report = await this.#engine.stepAsync(yieldToEventLoop);
        } finally {
          clearTimeout(watchdog);
        }
        const stepMs = performance.now() - t0;
        if (report.kind !== "idle") this.#stepWait.observe(stepMs);
        if (report.work) {
          this.#stepTotals.add(report.work, report.nativeMs);
          if (this.#stepTrace) this.#traceStep(report, t0, stepMs);
        }
        this.#liveness.observe(stepMs);
        const items: z.infer<typeof TokenDeltaItem>[] = [];
        for (const d of report.deltas) {
          if (d.finished) this.#finish(d);
          else {items.push({
              requestId: d.requestId,
              tokenIds: d.tokenIds,
              text: d.text,
              ...(d.logprobs ? { logprobs: d.logprobs } : {}),
              ...(d.topLogprobs ? { topLogprobs: d.topLogprobs } : {}),
              ...(d.promptLogprobs ? { promptLogprobs: d.promptLogprobs } : {}),
            });}
        }
        if (items.length > 0) this.#o.launcher.send({ type: "token_delta", items });
        if (report.kind === "idle" && this.#engine.scheduler.numRunning === 0 && this.#engine.hasWork) {
          // Blocks held by a transfer plan: its end (or deadline) frees them and restarts the loop.
          if ((this.#o.transfers?.openPlans ?? 0) > 0) break;
          throw new Error(
            `worker ${this.#o.rank}: the scheduler cannot admit ${
              this.#engine.scheduler.waiting[0]?.requestId
            } although nothing runs`,
          );
        }
        this.#report();
        await yieldToEventLoop();
        // A host-path payload moves only while both workers' event loops are free, one socket buffer
        // at a time: between back-to-back steps it crawled (28 MiB took seconds behind 20 ms steps)
        // and plans missed their deadlines. So a step waits for a payload in flight, up to a bound.
        const x = this.#o.transfers;
        if (x && x.payloadsInFlight > 0) await settlesWithin(x.payloadsSettled(), PAYLOAD_PAUSE_MAX_MS);
      }
      // Idle (or parked on blocks a transfer holds): messages are read at once, so step_wait_ms is 0.
      this.#stepping = false;
      this.#auditIdleBlocks();
      this.#report();
      const spin = this.#o.idleSpinMs ?? 0;
      if (spin > 0 && !this.#exiting) keepAwakeWhile(() => !this.#exiting, spin);
    } catch (e) {
      this.#fail(e as Error);
    } finally {
      this.#stepping = false;
      this.#loop = undefined;
    }
  }

  #finish(d: StreamDelta): void {
    this.#held.delete(d.requestId);
    this.#awaitingBlocks.delete(d.requestId);
    const o = d.output;
    this.#o.launcher.send({
      type: "finish",
      requestId: d.requestId,
      reason: d.finishReason ?? "stop",
      tokenIds: d.tokenIds,
      text: d.text,
      ...(d.logprobs ? { logprobs: d.logprobs } : {}),
      ...(d.topLogprobs ? { topLogprobs: d.topLogprobs } : {}),
      ...(d.promptLogprobs ? { promptLogprobs: d.promptLogprobs } : {}),
      ...(d.error ? { error: d.error } : {}),
      ...(o
        ? {
          output: {
            tokenIds: o.tokenIds,
            text: o.text,
            ...(o.logprobs ? { logprobs: o.logprobs } : {}),
            ...(o.topLogprobs ? { topLogprobs: o.topLogprobs } : {}),
            ...(o.promptLogprobs ? { promptLogprobs: o.promptLogprobs } : {}),
            metrics: { ...o.metrics, rank: this.#o.rank },
          },
        }
        : {}),
    });
  }

  /** Sends the block delta (if anything changed) and the request ids it reflects; pushes stats. */
  #report(): void {
    for (const id of this.#awaitingBlocks) {
      const seq = this.#held.get(id);
      if (!seq || seq.blockTable.length > 0) {
        this.#allocated.push(id);
        this.#awaitingBlocks.delete(id);
      }
    }
    if (this.controlConnected) {
      const delta = this.#engine.takeDelta();
      if (delta) {
        const queued = this.#queued;
        const allocated = this.#allocated;
        this.#queued = [];
        this.#allocated = [];
        this.#control!.send({
          type: "block_delta",
          delta,
          ...(queued.length ? { queued } : {}),
          ...(allocated.length ? { allocated } : {}),
        });
      }
    }
    // Push stats on every change of the running/waiting set (so /metrics never shows a request
    // that has ended, or misses one that started) and at least every statsIntervalMs meanwhile; a
    // start or end of stepping changes step_wait_ms, so it pushes too.
    const now = Date.now();
    const stats = this.#engine.rankStats();
    const shape = `${stats.numRunning}/${stats.numWaiting}/${stats.numFinished}/${this.#stepping}`;
    // While transfer plans are open here, an idle worker holds its stats back (its blocks change on
    // every phase, and each push costs both ends event-loop time on the plan's path): the report
    // after the last plan closes pushes them.
    const idle = !this.#engine.hasWork && (this.#o.transfers?.openPlans ?? 0) === 0;
    if (shape !== this.#lastStatsShape || now - this.#lastStats >= (this.#o.statsIntervalMs ?? 500) || idle) {
      this.#lastStats = now;
      this.#lastStatsShape = shape;
      this.#o.launcher.send({ type: "stats", rank: this.#o.rank, counters: this.#rankCounters(stats) });
      this.#control?.send(this.#controlStats());
    }
  }

  #snapshotMessage(): MessageOf<"block_snapshot"> {
    this.#queued = [];
    this.#allocated = [];
    const queued = [...this.#held.keys()];
    const allocated = queued.filter((id) => (this.#held.get(id)?.blockTable.length ?? 0) > 0);
    return { type: "block_snapshot", snapshot: this.#engine.snapshot(), queued, allocated };
  }

  async #connectControl(): Promise<void> {
    while (!this.#exiting) {
      try {
        const stream = await connectUnix(this.#o.controlSocketPath, { timeoutMs: 1000 });
        const conn = new Connection(stream, {
          name: `worker${this.#o.rank}->control`,
          heartbeat: this.#o.heartbeat,
          log: this.#log,
        });
        conn.onMessage((m) => this.#fromControl(conn, m));
        conn.onClose(({ reason }) => {
          if (this.#control !== conn) return;
          this.#control = undefined;
          if (!this.#exiting) {
            this.#log(`[worker ${this.#o.rank}] control plane connection ended (${reason}); reconnecting`);
            void this.#connectControl();
          }
        });
        conn.send({ type: "hello", role: "worker", rank: this.#o.rank, epoch: this.#o.epoch, pid: this.#o.pid });
        this.#control = conn;
        conn.send(this.#snapshotMessage());
        conn.send(this.#controlStats());
        for (const s of this.#o.dataPath?.status() ?? []) {
          conn.send({ type: "nccl_pair_status", rank: this.#o.rank, ...s });
        }
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100)); // the launcher is restarting it
      }
    }
  }

  #fromControl(conn: Connection, m: Message): void {
    switch (m.type) {
      case "snapshot_request":
        conn.send(this.#snapshotMessage());
        return;
      case "ready":
        return;
      case "nccl_pair_down":
        this.#o.dataPath?.fallBack(m.peerRank, `the control plane says: ${m.reason}`);
        return;
      case "transfer_prepare":
      case "transfer_execute":
      case "transfer_publish":
      case "transfer_finalize":
      case "transfer_abort":
        return this.#transferPhase(conn, m);
      default:
        if (m.id !== undefined) {
          conn.replyError(m, "unexpected", `worker ${this.#o.rank} does not handle ${m.type} yet`);
        }
    }
  }

  #transferPhase(conn: Connection, m: TransferPhaseMessage): void {
    const x = this.#o.transfers;
    if (!x) {
      if (m.id !== undefined) {
        conn.reply(m, {
          type: "transfer_ack",
          planId: m.planId,
          phase: m.type.slice("transfer_".length) as "abort",
          rank: this.#o.rank,
          ok: false,
          error: `worker ${this.#o.rank} has no transfer data path`,
        });
      }
      return;
    }
    const t0 = performance.now();
    let answered = false;
    // The plan's next phases and its peer's signals come soon: read them without a wake-up. From
    // now, not from the first check: a prepare pins and reserves only after an await.
    keepAwakeWhile(() => !answered || x.openPlans > 0, PLAN_AWAKE_MAX_MS);
    void x.handle(m).then((ack) => {
      answered = true;
      if (m.id !== undefined) {
        conn.reply(m, {
          type: "transfer_ack",
          ...ack,
          handledMs: performance.now() - t0,
          receivedAt: performance.timeOrigin + t0,
        });
      }
    });
  }

  /**
   * A plan reserved, pinned, published or released blocks: report, and resume waiting requests.
   * Deferred to the next turn of the event loop, so the phase's ack goes out first; and while a
   * plan is still open here, until it closes (or {@link TRANSFER_REPORT_HOLD_MAX_MS} passed): its
   * next phase and its peer's signal are due within a fraction of a millisecond, and encoding the
   * block delta and stats would hold this event loop on the plan's path.
   */
  #afterTransferChange(): void {
    if ((this.#o.transfers?.openPlans ?? 0) > 0) {
      this.#transferReportHold ??= setTimeout(() => this.#flushTransferChange(), TRANSFER_REPORT_HOLD_MAX_MS);
      return;
    }
    if (this.#transferChangePending) return;
    this.#transferChangePending = true;
    void yieldToEventLoop().then(() => this.#flushTransferChange());
  }

  #flushTransferChange(): void {
    clearTimeout(this.#transferReportHold);
    this.#transferReportHold = undefined;
    this.#transferChangePending = false;
    this.#reportTransferChange();
  }

  #reportTransferChange(): void {
    this.#auditIdleBlocks();
    this.#report();
    if (this.#engine.hasWork && !this.#exiting) this.#loop ??= this.#run();
  }

  /** The launcher's view of this rank: engine stats, data-path counters, the rank, leaked blocks. */
  #rankCounters(stats: RankStats): Record<string, number> {
    return {
      ...stats,
      // Built only for a push, not for the per-step check of whether to push.
      ...this.#engine.iterationTokens.counters(),
      ...this.#engine.maskTimes.counters(),
      ...this.#o.dataPath?.counters(),
      rank: this.#o.rank,
      leakedBlocks: this.#audit.leakedBlocks,
      invariantViolations: this.#audit.invariantViolations,
    };
  }

  /** One step's line of the LMPOOL_TRACE_STEPS trace. */
  #traceStep(report: { kind: string; work?: object; nativeMs: number; totalMs: number }, t0: number, stepMs: number) {
    const gapMs = this.#lastStepEnd === undefined ? null : t0 - this.#lastStepEnd;
    this.#lastStepEnd = t0 + stepMs;
    const line = {
      t: performance.timeOrigin + t0,
      rank: this.#o.rank,
      kind: report.kind,
      ...report.work,
      nativeMs: report.nativeMs,
      totalMs: report.totalMs,
      stepMs,
      gapMs,
    };
    appendText(this.#stepTrace!, JSON.stringify(line) + "\n");
  }

  /** Tells the peers how long a step on this thread may keep heartbeats from going out. */
  #announceBusyStep(): void {
    const expectedMs = this.#liveness.announcementMs();
    if (expectedMs === undefined) return;
    this.#o.launcher.announceBusy(expectedMs);
    this.#control?.announceBusy(expectedMs);
  }

  /**
   * A device step that never ends would go unnoticed by heartbeats: past its limit the worker gives
   * up its connections, and the launcher kills, restarts and re-routes.
   */
  #watchStep(): ReturnType<typeof setTimeout> | undefined {
    const limitMs = this.#liveness.hangLimitMs();
    if (limitMs === undefined) return undefined; // the peers' heartbeat checks judge it
    return setTimeout(() => {
      this.#log(`[worker ${this.#o.rank}] a step has run for more than ${Math.round(limitMs)} ms: the device is stuck`);
      this.#exit(1, "a step never ended");
    }, limitMs);
  }

  /** The leak check, when nothing here may hold blocks (no request, no open transfer plan). */
  #auditIdleBlocks(): void {
    if (this.#engine.hasWork || this.#held.size > 0 || (this.#o.transfers?.openPlans ?? 0) > 0) return;
    const violation = this.#audit.run(this.#engine.blocks);
    if (violation) this.#log(`[worker ${this.#o.rank}] ${violation}`);
  }

  /**
   * What the control plane's cost model reads: KV bytes per block, cumulative prefill timings, data
   * paths per peer, and step_wait_ms: how long a transfer phase message waits here for the current
   * step to end (the residual E[s^2] / (2 E[s]) while stepping, 0 while idle).
   */
  #controlStats(): MessageOf<"stats"> {
    // The step that finished the last request already reports idle: the next message is read at
    // once; so is every message while the device computes a step apart from this thread.
    const readsDuringSteps = this.#engine.readsMessagesDuringSteps;
    const busy = this.#stepping && this.#engine.hasWork && !readsDuringSteps;
    const counters = {
      ...this.#o.dataPath?.counters(),
      kv_block_bytes: this.#engine.kv.blockBytes,
      ...this.#stepTotals.counters(),
      step_wait_ms: this.#stepWait.waitMs(busy),
      step_token_budget: this.#engine.scheduler.stepTokenBudget,
      reads_during_steps: readsDuringSteps ? 1 : 0,
    };
    return { type: "stats", rank: this.#o.rank, counters };
  }

  #fail(e: Error): void {
    this.#log(`[worker ${this.#o.rank}] engine failed: ${e.stack ?? e.message}`);
    for (const id of [...this.#held.keys()]) {
      this.#o.launcher.send({
        type: "finish",
        requestId: id,
        reason: "error",
        tokenIds: [],
        text: "",
        error: { name: e.name, message: e.message },
      });
      this.#held.delete(id);
    }
    this.#exit(1, `engine failed: ${e.message}`);
  }

  #exit(code: number, why: string): void {
    if (this.#exiting) return;
    this.#exiting = true;
    void this.#o.transfers?.close();
    this.#control?.close("worker exiting");
    this.#o.launcher.close("worker exiting");
    // A step on the device ends first (the loop stops after it): onExit frees its model.
    const loop = this.#loop ?? Promise.resolve();
    void settlesWithin(loop, EXIT_STEP_WAIT_MS).then(() => this.#o.onExit(code, why));
  }
}
