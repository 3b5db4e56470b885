/**
 * The launcher's side of the process tree: the socket workers connect to, the control-plane and
 * worker children, their connections, and their supervision: one {@link Supervisor} decides when a
 * dead child (control plane or worker, exited or declared hung) starts again. A restarted worker
 * has a new epoch: the control plane retired the old one's blocks and transfers, so it rejoins
 * the page table empty. Ranks that share a device start one after another, each sizing its KV
 * cache to its share of the device. LLMEngine sees ranks and messages; this file sees processes
 * and sockets.
 * @module
 */
import type { RankPair } from "../global/topology.ts";
import type { PageTableDiff } from "../global/page_table_diff.ts";
import type { RoutingConfigInput } from "../global/routing_config.ts";
import type { TransferConfig } from "../transfer/control/transfer_config.ts";
import type { WorkerMainConfig } from "../processes/worker_main.ts";
import { Connection, type Outgoing } from "../protocol/connection.ts";
import type { HeartbeatOptions } from "../protocol/heartbeat_monitor.ts";
import type { Message, MessageOf } from "../protocol/messages.ts";
import { ConnectionClosedError } from "../protocol/protocol_errors.ts";
import { pid } from "../runtime/env.ts";
import { settlesWithin } from "../core/clock.ts";
import type { ChildProcessHandle } from "../runtime/subprocess.ts";
import { type ByteStream, connectUnix, listenUnix, type UnixServer } from "../runtime/unix_socket.ts";
import type { RankHealth } from "../core/engine_api.ts";
import { makeRunDir, removeStaleRunDirs, spawnControlPlane, spawnWorker } from "./process_launch.ts";
import { type RestartPolicy, Supervisor } from "./supervisor.ts";
import { awaitPageTableMatch, deviceShare, workerDataPath, workerThreadEnv } from "./worker_launch_config.ts";

/** What EngineProcesses.start needs. */
export interface EngineProcessesOptions {
  worldSize: number;
  gpus: number[];
  engine: WorkerMainConfig["engine"];
  pairs: RankPair[];
  routing?: RoutingConfigInput;
  /** KV transfer mode and knobs (resolved) for the control plane; workers open their KV peer sockets unless off. */
  transfers: TransferConfig;
  heartbeat?: HeartbeatOptions;
  restartControlPlane: boolean;
  /** Restart dead workers (default true). */
  restartWorkers?: boolean;
  /** Back-off and limits of restarts (lib/engine/supervisor.ts). */
  restartPolicy?: Partial<RestartPolicy>;
  startTimeoutMs: number;
  log: (line: string) => void;
  /** The worker entry module (default lib/processes/worker_main.ts; tests pass a fault-injecting one). */
  workerMain?: string;
}

interface WorkerSlot {
  rank: number;
  epoch: number;
  proc: ChildProcessHandle;
  conn: Connection | undefined;
  /** Its model and KV cache are in memory (`loaded`); the next rank of its device may start. */
  loaded: boolean;
  ready: MessageOf<"ready"> | undefined;
  /** The control plane holds its snapshot: routing sees it, so it serves. */
  joined: boolean;
  alive: boolean;
  onLoaded?: () => void;
  onReady?: () => void;
}

/** The control plane starts in well under a second and requests route locally while it is down: retry soon. */
const CONTROL_FIRST_RESTART_DELAY_MS = 50;
const CONTROL = "control plane";
const workerChild = (rank: number) => `worker ${rank}`;

/** The launcher's children and their connections. */
export class EngineProcesses {
  /** Worker messages other than hello/loaded/ready. */
  onWorkerMessage: (rank: number, m: Message) => void = () => {};
  /** A worker died (process exit or connection loss); called once per incarnation that was ready. */
  onWorkerDied: (rank: number, why: string) => void = () => {};
  /** Messages the control plane sends unasked (page-table changes for KV events). */
  onControlMessage: (m: Message) => void = () => {};
  /** A control plane (the first, or a restarted one) said ready to this launcher. */
  onControlConnected: () => void = () => {};
  readonly #o: EngineProcessesOptions;
  readonly #run: { dir: string; remove(): void };
  readonly #workers = new Map<number, WorkerSlot>();
  readonly #supervisor: Supervisor;
  /** Ranks that share a device load one at a time (each sizes its KV to its share). */
  readonly #deviceQueue = new Map<number, Promise<void>>();
  readonly #restartTimers = new Set<ReturnType<typeof setTimeout>>();
  #started = false;
  #server: UnixServer | undefined;
  #control: Connection | undefined;
  #controlProc: ChildProcessHandle | undefined;
  #controlEpoch = 0;
  #nextWorkerEpoch = 1;
  #stopping = false;

  private constructor(o: EngineProcessesOptions) {
    this.#o = o;
    for (const dir of removeStaleRunDirs()) {
      o.log(`[lmpool] removed ${dir}, left behind by a launcher that no longer runs`);
    }
    this.#run = makeRunDir();
    this.#supervisor = new Supervisor(o.restartPolicy).override(CONTROL, {
      initialDelayMs: CONTROL_FIRST_RESTART_DELAY_MS,
    });
  }

  /** Starts the control plane and every worker, and waits until all are ready. */
  static async start(o: EngineProcessesOptions): Promise<EngineProcesses> {
    const p = new EngineProcesses(o);
    try {
      p.#server = await listenUnix(p.launcherSocket, (s) => p.#acceptWorker(s));
      await p.#startControl();
      o.log(`[lmpool] starting ${o.worldSize} worker${o.worldSize > 1 ? "s" : ""}...`);
      await Promise.all(Array.from({ length: o.worldSize }, (_, r) => p.#startWorkerOnDevice(r)));
      await p.#waitForPageTable(o.worldSize, 30_000);
      for (const w of p.#workers.values()) w.joined = true;
      p.#started = true;
      return p;
    } catch (e) {
      await p.stop();
      throw e;
    }
  }

  get launcherSocket(): string {
    return `${this.#run.dir}/launcher.sock`;
  }

  get controlSocket(): string {
    return `${this.#run.dir}/control.sock`;
  }

  /** Pid of the control-plane process (undefined while restarting). */
  get controlPid(): number | undefined {
    return this.#controlProc?.pid;
  }

  /** True while the launcher is connected to a control plane. */
  get controlConnected(): boolean {
    return this.#control !== undefined && !this.#control.closed;
  }

  /** Pid of a worker process. */
  workerPid(rank: number): number | undefined {
    return this.#workers.get(rank)?.proc.pid;
  }

  /** What a worker reported when ready. */
  readyInfo(rank: number): MessageOf<"ready"> {
    const r = this.#workers.get(rank)?.ready;
    if (!r) throw new RangeError(`worker ${rank} is not ready`);
    return r;
  }

  /** Control-plane restarts so far. */
  get controlRestarts(): number {
    return this.#supervisor.restarts(CONTROL);
  }

  /** Every configured rank: serving now or not, and its worker's restarts so far. */
  health(): RankHealth[] {
    return Array.from({ length: this.#o.worldSize }, (_, rank) => {
      const w = this.#workers.get(rank);
      return { rank, up: !!(w?.alive && w.joined && w.conn), restarts: this.#supervisor.restarts(workerChild(rank)) };
    });
  }

  /** Ranks whose worker is alive, ready and known to routing. */
  liveRanks(): number[] {
    return [...this.#workers.values()].filter((w) => w.alive && w.joined && w.conn).map((w) => w.rank).sort((a, b) =>
      a - b
    );
  }

  /** Sends to a live worker; false when it is gone. */
  sendWorker(rank: number, m: Outgoing): boolean {
    const w = this.#workers.get(rank);
    return !!w?.alive && !!w.conn && w.conn.send(m);
  }

  /** Sends to the control plane; false while it is down. */
  sendControl(m: Outgoing): boolean {
    return this.#control?.send(m) ?? false;
  }

  /** Asks the control plane for a route; rejects at once while it is down. */
  routeQuery(m: Outgoing & { type: "route_query" }, timeoutMs: number): Promise<MessageOf<"route_result">> {
    if (!this.#control) return Promise.reject(new ConnectionClosedError("control plane is restarting"));
    return this.#control.request(m, { expect: ["route_result"], timeoutMs });
  }

  /** Routing counters of the control plane. */
  async controlStats(): Promise<Record<string, number>> {
    if (!this.#control) throw new ConnectionClosedError("control plane is restarting");
    return (await this.#control.request({ type: "stats_request" }, { expect: ["stats"], timeoutMs: 2000 })).counters;
  }

  /** Sends a signal to the control-plane process (tests: SIGKILL it mid-run). */
  killControl(signal: "SIGKILL" | "SIGTERM" = "SIGKILL"): void {
    this.#controlProc?.kill(signal);
  }

  /** Sends a signal to a worker process. */
  killWorker(rank: number, signal: "SIGKILL" | "SIGTERM" = "SIGKILL"): void {
    this.#workers.get(rank)?.proc.kill(signal);
  }

  /** Resolves once a control plane is connected again (after a kill, say). */
  async waitForControl(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.controlConnected) {
      if (Date.now() > deadline) throw new Error(`control plane not back within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Compares the control plane's page table with fresh full snapshots of every live worker (the
   * workers send the same snapshots to the control plane). Meaningful when no request runs.
   */
  async checkPageTable(timeoutMs = 5000): Promise<PageTableDiff> {
    const live = this.liveRanks();
    const snaps = await Promise.all(
      live.map(async (r) =>
        (await this.#workers.get(r)!.conn!.request({ type: "snapshot_request", reason: "consistency check" }, {
          expect: ["block_snapshot"],
          timeoutMs,
        })).snapshot
      ),
    );
    return await awaitPageTableMatch(snaps, timeoutMs, async () => {
      await this.waitForControl(timeoutMs);
      return (await this.#control!.request({ type: "page_table_request" }, { expect: ["page_table"], timeoutMs }))
        .snapshots;
    });
  }

  /** The control plane's page table now: every healthy rank's slice as a full snapshot. */
  async pageTable(timeoutMs = 5000): Promise<MessageOf<"page_table">["snapshots"]> {
    await this.waitForControl(timeoutMs);
    return (await this.#control!.request({ type: "page_table_request" }, { expect: ["page_table"], timeoutMs }))
      .snapshots;
  }

  /** Stops every child (shutdown, then SIGKILL after 5 s; at once for one still loading) and removes the sockets. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    for (const t of this.#restartTimers) clearTimeout(t);
    this.#restartTimers.clear();
    const procs = [...this.#workers.values()].map((w) => w.proc);
    if (this.#controlProc) procs.push(this.#controlProc);
    for (const w of this.#workers.values()) {
      // One still loading (a restart) has no connection to be told on, and nothing to save.
      if (!w.conn?.send({ type: "shutdown", reason: "engine shutdown" })) w.proc.kill("SIGKILL");
    }
    this.#control?.send({ type: "shutdown", reason: "engine shutdown" });
    const all = Promise.all(procs.map((p) => p.exited));
    if (!(await settlesWithin(all, 5000))) {
      this.#o.log("[lmpool] children did not exit within 5 s of shutdown; killing them");
      for (const p of procs) p.kill("SIGKILL");
      await all;
    }
    for (const w of this.#workers.values()) w.conn?.close("engine shutdown");
    this.#control?.close("engine shutdown");
    await this.#server?.close();
    this.#run.remove();
  }

  /** Waits until the control plane holds a snapshot of `n` ranks (routing is KV-aware from then on). */
  async #waitForPageTable(n: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.controlStats().catch(() => undefined))?.healthy_ranks !== n) {
      if (Date.now() > deadline) {
        throw new Error(`the control plane did not receive snapshots of all ${n} workers within ${timeoutMs} ms`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * A restarted worker serves once the control plane holds its snapshot (so routing can choose it);
   * while the control plane is itself down, requests route locally and the rank joins at once.
   */
  async #waitForJoin(rank: number, timeoutMs = 10_000): Promise<void> {
    const slot = this.#workers.get(rank);
    const deadline = Date.now() + timeoutMs;
    while (slot && slot.alive && !this.#stopping && Date.now() < deadline && this.controlConnected) {
      const alive = [...this.#workers.values()].filter((w) => w.alive).length;
      if (((await this.controlStats().catch(() => undefined))?.healthy_ranks ?? -1) >= alive) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    if (slot) slot.joined = slot.alive;
  }

  async #startControl(): Promise<void> {
    const epoch = ++this.#controlEpoch;
    const proc = spawnControlPlane({
      socketPath: this.controlSocket,
      epoch,
      worldSize: this.#o.worldSize,
      pairs: this.#o.pairs,
      routing: this.#o.routing,
      transfers: this.#o.transfers,
      heartbeat: this.#o.heartbeat,
    });
    this.#controlProc = proc;
    void proc.exited.then((exit) =>
      this.#onControlExit(proc, `exit code ${exit.code}${exit.signal ? `, signal ${exit.signal}` : ""}`)
    );
    const stream = await connectUnix(this.controlSocket, { timeoutMs: 30_000 });
    const conn = new Connection(stream, { name: "launcher->control", heartbeat: this.#o.heartbeat, log: this.#o.log });
    conn.onMessage((m) => this.onControlMessage(m));
    conn.onClose(({ reason }) => {
      if (this.#control === conn) this.#control = undefined;
      // A control plane that stopped answering is killed; its exit triggers the restart.
      if (!this.#stopping && this.#controlProc === proc) proc.kill("SIGKILL");
      if (!this.#stopping) this.#o.log(`[lmpool] control plane connection ended: ${reason}`);
    });
    await conn.request({ type: "hello", role: "launcher", epoch, pid: pid() }, {
      expect: ["ready"],
      timeoutMs: 30_000,
    });
    this.#control = conn;
    this.onControlConnected();
  }

  #onControlExit(proc: ChildProcessHandle, why: string): void {
    if (this.#stopping || this.#controlProc !== proc) return;
    this.#controlProc = undefined;
    this.#control?.close("control plane exited");
    this.#control = undefined;
    const d = this.#o.restartControlPlane
      ? this.#supervisor.died(CONTROL)
      : { restart: false as const, why: "restarts are off" };
    if (!d.restart) {
      this.#o.log(
        `[lmpool] control plane exited (${why}); not restarting (${d.why}): requests route locally from now on`,
      );
      return;
    }
    this.#o.log(
      `[lmpool] control plane exited (${why}); restarting it in ${d.delayMs} ms (restart ${d.attempt}; workers resend full snapshots)`,
    );
    this.#later(d.delayMs, () =>
      this.#startControl().then(
        () => this.#supervisor.up(CONTROL),
        (e) => this.#o.log(`[lmpool] control plane restart failed: ${(e as Error).message}`),
      ));
  }

  /** Runs `f` after `ms` unless the processes stop first. */
  #later(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.#restartTimers.delete(t);
      if (!this.#stopping) f();
    }, ms);
    this.#restartTimers.add(t);
  }

  /**
   * Starts rank `rank`'s worker once the ranks before it on its device have loaded (their KV is
   * allocated), and resolves when it is ready. A rank that shares its device with k - 1 others sizes
   * its KV cache to a 1/k share: its memory fraction counts the ranks already loaded there, whose
   * memory it sees as used. The next rank starts at `loaded`, not at ready: a device-local data
   * path opens only once both of its ranks are up.
   */
  #startWorkerOnDevice(rank: number): Promise<void> {
    const gpu = this.#o.gpus[rank]!;
    let ready!: Promise<void>;
    const run = () => {
      const loaded = (r: number) => !!(this.#workers.get(r)?.alive && this.#workers.get(r)?.loaded);
      const start = this.#startWorker(rank, deviceShare(this.#o.gpus, rank, loaded, this.#o.engine));
      ready = start.ready;
      return start.loaded;
    };
    const prev = this.#deviceQueue.get(gpu) ?? Promise.resolve();
    const loaded = prev.then(run, run);
    this.#deviceQueue.set(gpu, loaded.catch(() => {}));
    return loaded.then(() => ready);
  }

  /** A worker died after start-up: start it again after the supervisor's back-off. */
  #restartWorker(rank: number, why: string): void {
    if (!this.#started || this.#stopping || this.#o.restartWorkers === false) return;
    const d = this.#supervisor.died(workerChild(rank));
    if (!d.restart) {
      this.#o.log(
        `[lmpool] worker ${rank} is not restarted (${d.why}); ${this.liveRanks().length} of ${this.#o.worldSize} ranks serve`,
      );
      return;
    }
    this.#o.log(`[lmpool] restarting worker ${rank} in ${d.delayMs} ms (restart ${d.attempt}) after: ${why}`);
    this.#later(d.delayMs, () => {
      this.#startWorkerOnDevice(rank).then(
        async () => {
          await this.#waitForJoin(rank);
          this.#supervisor.up(workerChild(rank));
          this.#o.log(
            `[lmpool] worker ${rank} rejoined (restart ${d.attempt}); ${this.liveRanks().length} of ${this.#o.worldSize} ranks serve`,
          );
        },
        // Its exit (or the kill below) reaches #workerDown, which schedules the next attempt.
        (e) => this.#o.log(`[lmpool] worker ${rank} restart failed: ${(e as Error).message}`),
      );
    });
  }

  /** Spawns rank `rank`'s worker: `loaded` settles when its KV is allocated, `ready` when it serves. */
  #startWorker(
    rank: number,
    engineOverrides: Partial<EngineProcessesOptions["engine"]> = {},
  ): { loaded: Promise<void>; ready: Promise<void> } {
    const epoch = this.#nextWorkerEpoch++;
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    const ready = new Promise<void>((res, rej) => ((readyResolve = res), (readyReject = rej)));
    let loadedResolve!: () => void;
    // A start-up that fails before `loaded` releases the device queue too.
    const loaded = new Promise<void>((res) => (loadedResolve = res));
    void ready.then(loadedResolve, loadedResolve);
    const proc = spawnWorker(
      {
        rank,
        epoch,
        gpu: this.#o.gpus[rank]!,
        launcherSocketPath: this.launcherSocket,
        controlSocketPath: this.controlSocket,
        engine: { ...this.#o.engine, ...engineOverrides },
        heartbeat: this.#o.heartbeat,
        ...(this.#o.transfers.mode === "off"
          ? {}
          : { peerSocketDir: this.#run.dir, dataPath: workerDataPath(this.#o, rank) }),
      },
      workerThreadEnv(this.#o.worldSize),
      this.#o.workerMain,
    );
    const slot: WorkerSlot = {
      rank,
      epoch,
      proc,
      conn: undefined,
      loaded: false,
      ready: undefined,
      joined: false,
      alive: true,
      onLoaded: loadedResolve,
      onReady: readyResolve,
    };
    this.#workers.set(rank, slot);
    void proc.exited.then((exit) => {
      const why = `worker ${rank} (pid ${proc.pid}) exited with ${
        exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`
      }`;
      if (!slot.ready) readyReject(new Error(`${why} during start-up`));
      this.#workerDown(slot, why);
    });
    const timer = setTimeout(
      () => readyReject(new Error(`worker ${rank} was not ready within ${this.#o.startTimeoutMs} ms`)),
      this.#o.startTimeoutMs,
    );
    const served = ready.then(
      () => {
        clearTimeout(timer);
        this.#o.log(
          `[lmpool] worker ${rank} ready: ${slot.ready!.numBlocks} KV blocks of ${slot.ready!.blockSize} tokens (${
            slot.ready!.backend
          })`,
        );
      },
      (e) => {
        clearTimeout(timer);
        proc.kill("SIGKILL"); // hung in start-up: its exit reports it down
        throw e;
      },
    );
    served.catch(() => {}); // its callers see the failure; this only marks it handled until they attach
    return { loaded, ready: served };
  }

  #acceptWorker(stream: ByteStream): void {
    const conn = new Connection(stream, { name: "launcher<-worker", heartbeat: this.#o.heartbeat, log: this.#o.log });
    let slot: WorkerSlot | undefined;
    conn.onMessage((m) => {
      if (!slot) {
        const s = m.type === "hello" && m.rank !== undefined ? this.#workers.get(m.rank) : undefined;
        if (!s || m.type !== "hello" || s.epoch !== m.epoch) {
          this.#o.log(
            `[lmpool] rejected a worker connection opening with ${m.type} (${JSON.stringify(m).slice(0, 120)})`,
          );
          conn.close("unknown worker");
          return;
        }
        slot = s;
        slot.conn = conn;
        return;
      }
      if (m.type === "loaded") {
        slot.loaded = true;
        slot.onLoaded?.();
        return;
      }
      if (m.type === "ready") {
        slot.loaded = true;
        slot.ready = m;
        slot.onReady?.();
        return;
      }
      this.onWorkerMessage(slot.rank, m);
    });
    conn.onClose(({ reason, dead }) => {
      if (slot && slot.conn === conn) {
        this.#workerDown(slot, `worker ${slot.rank} connection ${dead ? "went silent" : "closed"}: ${reason}`);
      }
    });
  }

  #workerDown(slot: WorkerSlot, why: string): void {
    if (!slot.alive || this.#stopping) return;
    slot.alive = false;
    slot.conn?.close(why);
    slot.proc.kill("SIGKILL"); // unresponsive but alive: make it dead for sure
    this.#o.log(`[lmpool] ${why}`);
    this.sendControl({ type: "rank_down", rank: slot.rank, epoch: slot.epoch, reason: why });
    if (slot.ready) this.onWorkerDied(slot.rank, why);
    // Restart once the process is gone for sure (a hung one exits from the SIGKILL above).
    void slot.proc.exited.then(() => {
      if (this.#workers.get(slot.rank) === slot) this.#restartWorker(slot.rank, why);
    });
  }
}
