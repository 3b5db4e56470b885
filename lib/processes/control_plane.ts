/**
 * The control-plane server: one Unix socket that the launcher and every worker connect to, and one
 * event loop that applies every authoritative change (routes, releases, snapshots, deltas, dead
 * ranks) to the Global Scheduler in arrival order. It also relays NCCL unique ids and CUDA IPC
 * handles between NVLink partners at start-up (on short-lived connections that open with
 * nccl_id_offer or ipc_offer). Runs inside control_main.ts, or in-process for tests.
 * @module
 */
import type { Clock } from "../core/clock.ts";
import { CapacityError } from "../core/errors.ts";
import { Connection } from "../protocol/connection.ts";
import type { HeartbeatOptions } from "../protocol/heartbeat_monitor.ts";
import type { Message, MessageOf } from "../protocol/messages.ts";
import { readSetting } from "../runtime/env.ts";
import { appendText } from "../runtime/files.ts";
import { listenUnix, type UnixServer } from "../runtime/unix_socket.ts";
import type { ApplyResult } from "../global/global_block_manager.ts";
import { type GlobalScheduler, NoHealthyRankError } from "../global/global_scheduler.ts";
import { ControlDecisions } from "./control_decisions.ts";
import { IpcRendezvous } from "../transfer/paths/ipc/ipc_rendezvous.ts";
import { NcclRendezvous } from "../transfer/paths/nccl/nccl_rendezvous.ts";
import type { RoutingConfigInput } from "../global/routing_config.ts";
import type { NvlinkTopology } from "../global/topology.ts";
import type { TransferConfigInput } from "../transfer/control/transfer_config.ts";
import type { CoordinatorPhase, PhaseMessage, TransferAck } from "../transfer/control/transfer_coordinator.ts";
import type { TransferPlan } from "../transfer/control/transfer_plan.ts";
import type { TransferService } from "../transfer/control/transfer_service.ts";
// Every message family a control plane sends or receives registers itself with the codec on import.
import "../transfer/transfer_messages.ts";
import "../transfer/paths/ipc/ipc_messages.ts";
import "../transfer/paths/nccl/nccl_messages.ts";
import { pageTableChangeMessages } from "../kv_events/page_table_forwarding.ts";

/** Options of {@link ControlPlane.listen}. */
export interface ControlPlaneOptions {
  socketPath: string;
  /** Incarnation of this control plane (bumped by the launcher on every restart). */
  epoch: number;
  pid: number;
  routing?: RoutingConfigInput;
  topology?: NvlinkTopology;
  /** KV transfer mode and knobs (default: off in-process; LLMEngine passes its own). */
  transfers?: TransferConfigInput;
  /** Test hook run before each transfer phase (see TransferCoordinator). */
  beforeTransferPhase?: (plan: TransferPlan, phase: CoordinatorPhase) => void | Promise<void>;
  heartbeat?: Partial<HeartbeatOptions> | false;
  /** Time and timers of routing and transfers (default the real clock). */
  clock?: Clock;
  log?: (line: string) => void;
  /** Called when the launcher's connection ends (the process should exit: no orphans). */
  onLauncherGone?: (reason: string) => void;
  /** Called when a launcher says hello. */
  onLauncherConnected?: () => void;
  /** Called on a shutdown message. */
  onShutdown?: () => void;
}

/** The control-plane server and its state. */
export class ControlPlane {
  /** Routing, page-table and transfer decisions (the part the cluster simulator runs too). */
  readonly decisions: ControlDecisions;
  readonly scheduler: GlobalScheduler;
  /** KV transfer decisions and plans. */
  readonly transfers: TransferService;
  /** NCCL unique-id relay and the health of every direct pair (NCCL or CUDA IPC). */
  readonly nccl: NcclRendezvous;
  /** CUDA IPC handle relay. */
  readonly ipc: IpcRendezvous;
  readonly #server: UnixServer;
  readonly #o: ControlPlaneOptions;
  readonly #workers = new Map<number, { conn: Connection; epoch: number }>();
  readonly #launchers = new Set<Connection>();
  /** Launchers that publish KV events: they hear every page-table change. */
  readonly #kvEventSubscribers = new Set<Connection>();
  readonly #log: (line: string) => void;
  #closed = false;

  private constructor(server: UnixServer, o: ControlPlaneOptions) {
    this.#server = server;
    this.#o = o;
    this.#log = o.log ?? ((l) => console.error(l));
    this.decisions = new ControlDecisions({
      routing: o.routing,
      topology: o.topology,
      transfers: o.transfers,
      link: (rank, m, timeoutMs) => this.#transferRequest(rank, m, timeoutMs),
      idPrefix: `c${o.epoch}`,
      clock: o.clock,
      log: this.#log,
      beforeTransferPhase: o.beforeTransferPhase,
      ...transferTrace(this.#log),
    });
    this.scheduler = this.decisions.scheduler;
    this.transfers = this.decisions.transfers;
    this.nccl = new NcclRendezvous({
      topology: o.topology,
      sendPairDown: (rank, peerRank, reason) => {
        this.#log(
          `[control] direct pair ${Math.min(rank, peerRank)}-${
            Math.max(rank, peerRank)
          }: telling rank ${rank} to use the host path (${reason})`,
        );
        this.#workers.get(rank)?.conn.send({ type: "nccl_pair_down", peerRank, reason });
      },
    });
    this.ipc = new IpcRendezvous({ topology: o.topology });
  }

  /** Starts listening on `options.socketPath`. */
  static async listen(options: ControlPlaneOptions): Promise<ControlPlane> {
    // deno-lint-ignore prefer-const -- assigned once, after the callbacks that read it are made
    let self: ControlPlane | undefined;
    const pending: Connection[] = [];
    const server = await listenUnix(options.socketPath, (stream) => {
      const conn = new Connection(stream, { name: "control", heartbeat: options.heartbeat, log: options.log });
      if (self) self.#accept(conn);
      else pending.push(conn);
    });
    self = new ControlPlane(server, options);
    for (const c of pending) self.#accept(c);
    return self;
  }

  /** The socket path. */
  get socketPath(): string {
    return this.#server.path;
  }

  /** Launcher connections that said hello. */
  get launcherCount(): number {
    return this.#launchers.size;
  }

  /** Ranks with a live worker connection. */
  connectedRanks(): number[] {
    return [...this.#workers.keys()].sort((a, b) => a - b);
  }

  /** Closes every connection and the socket. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.decisions.stop();
    for (const w of this.#workers.values()) w.conn.close("control plane closing");
    for (const l of this.#launchers) l.close("control plane closing");
    await this.#server.close();
  }

  #accept(conn: Connection): void {
    let role: "launcher" | "worker" | "rendezvous" | undefined;
    let rank = -1;
    conn.onMessage((m) => {
      if (!role && (m.type === "nccl_id_offer" || m.type === "ipc_offer")) role = "rendezvous";
      if (role === "rendezvous") return this.#rendezvous(conn, m);
      if (!role) {
        if (m.type !== "hello") {
          conn.replyError(m, "protocol", `expected hello as the first message, got ${m.type}`);
          return;
        }
        if (m.role === "worker") {
          if (m.rank === undefined) return void conn.replyError(m, "schema", "a worker hello needs a rank", "rank");
          role = "worker";
          rank = m.rank;
          this.#workers.get(rank)?.conn.close(`rank ${rank} reconnected`);
          this.#workers.set(rank, { conn, epoch: m.epoch });
        } else {
          role = "launcher";
          this.#launchers.add(conn);
          this.#o.onLauncherConnected?.();
        }
        if (m.id !== undefined) {
          conn.reply(m, { type: "ready", role: "control", epoch: this.#o.epoch, pid: this.#o.pid });
        }
        return;
      }
      if (role === "launcher") this.#fromLauncher(conn, m);
      else this.#fromWorker(conn, rank, m);
    });
    conn.onClose(({ reason }) => {
      if (this.#closed) return;
      if (role === "worker" && this.#workers.get(rank)?.conn === conn) {
        this.#workers.delete(rank);
        // The worker may be alive (it will reconnect and resend a full snapshot): do not retire its epoch.
        this.decisions.rankDisconnected(rank);
        this.#log(`[control] worker ${rank} disconnected (${reason}); its blocks left the page table`);
      } else if (role === "launcher") {
        this.#launchers.delete(conn);
        this.#unsubscribeKvEvents(conn);
        this.#o.onLauncherGone?.(reason);
      } else if (role === "rendezvous") {
        this.nccl.dropOwner(conn);
        this.ipc.dropOwner(conn);
      }
    });
  }

  #fromLauncher(conn: Connection, m: Message): void {
    switch (m.type) {
      case "route_query":
        return this.#route(conn, m);
      case "route_release":
        this.decisions.release(m.requestId);
        return;
      case "rank_down":
        this.decisions.rankDown(m.rank, m.epoch);
        this.nccl.onRankDown(m.rank);
        this.ipc.onRankDown(m.rank);
        this.#log(`[control] rank ${m.rank} epoch ${m.epoch} down: ${m.reason}`);
        return;
      case "stats_request":
        conn.reply(m, {
          type: "stats",
          counters: {
            ...this.decisions.counters(),
            ...this.nccl.counters(),
            ...this.ipc.counters(),
          },
        });
        return;
      case "page_table_request":
        conn.reply(m, { type: "page_table", snapshots: this.scheduler.blocks.toSnapshots() });
        return;
      case "kv_events_subscribe":
        return this.#subscribeKvEvents(conn);
      case "shutdown":
        this.#o.onShutdown?.();
        return;
      default:
        if (m.id !== undefined) {
          conn.replyError(m, "unexpected", `the control plane does not handle ${m.type} from the launcher`);
        }
    }
  }

  #route(conn: Connection, m: MessageOf<"route_query">): void {
    try {
      const { decision: d, ready } = this.decisions.route(m);
      const reply = () =>
        conn.reply(m, {
          type: "route_result",
          requestId: m.requestId,
          rank: d.rank,
          reason: d.reason,
          matchedBlocks: d.matchedBlocks,
          feasible: d.feasible,
        });
      // A foreground transfer for this request: answer once its blocks are there (or it gave up).
      if (ready) void ready.then(reply);
      else reply();
    } catch (e) {
      const code = e instanceof NoHealthyRankError
        ? "no_healthy_rank"
        : e instanceof CapacityError
        ? "capacity"
        : e instanceof RangeError || e instanceof TypeError
        ? "bad_request"
        : "internal";
      conn.replyError(m, code, (e as Error).message);
    }
  }

  #fromWorker(conn: Connection, rank: number, m: Message): void {
    switch (m.type) {
      case "block_snapshot":
        if (m.snapshot.rank !== rank) {
          return void conn.replyError(
            m,
            "schema",
            `rank ${rank} sent a snapshot of rank ${m.snapshot.rank}`,
            "snapshot.rank",
          );
        }
        return this.#afterApply(conn, rank, this.decisions.applySnapshot(m.snapshot, m));
      case "block_delta":
        if (m.delta.rank !== rank) {
          return void conn.replyError(m, "schema", `rank ${rank} sent a delta of rank ${m.delta.rank}`, "delta.rank");
        }
        return this.#afterApply(conn, rank, this.decisions.applyDelta(m.delta, m));
      case "transfer_ack":
        return; // acks arrive as replies to the coordinator's requests; a late one is dropped
      case "stats":
        this.decisions.workerStats(rank, m.counters);
        return;
      case "nccl_pair_status":
        if (m.rank !== rank) {
          return void conn.replyError(m, "schema", `rank ${rank} sent the pair status of rank ${m.rank}`, "rank");
        }
        this.nccl.status(m);
        return;
      default:
        if (m.id !== undefined) {
          conn.replyError(m, "unexpected", `the control plane does not handle ${m.type} from a worker`);
        }
    }
  }

  /** A rendezvous connection carries offers only; each is answered once its partner's arrives. */
  #rendezvous(conn: Connection, m: Message): void {
    const answer = (
      reply: Parameters<Connection["send"]>[0],
    ) => (m.id === undefined ? conn.send(reply) : conn.reply(m, reply));
    if (m.type === "nccl_id_offer") return this.nccl.offer(m, conn, (a) => void answer({ type: "nccl_id", ...a }));
    if (m.type === "ipc_offer") return this.ipc.offer(m, conn, (a) => void answer({ type: "ipc_answer", ...a }));
    if (m.id !== undefined) {
      conn.replyError(m, "protocol", `a rendezvous connection carries nccl_id_offer and ipc_offer only, got ${m.type}`);
    }
  }

  #transferRequest(rank: number, m: PhaseMessage, timeoutMs: number): Promise<TransferAck> {
    const w = this.#workers.get(rank);
    if (!w) return Promise.reject(new Error(`rank ${rank} has no worker connection`));
    return w.conn.request(m, { expect: ["transfer_ack"], timeoutMs });
  }

  /** A launcher publishes KV events: it gets every rank's state now and each change from now on. */
  #subscribeKvEvents(conn: Connection): void {
    const blocks = this.scheduler.blocks;
    this.#kvEventSubscribers.add(conn);
    for (const snapshot of blocks.toSnapshots()) {
      for (const m of pageTableChangeMessages({ kind: "snapshot", snapshot })) conn.send(m);
    }
    blocks.onChange = (change) => {
      const out = pageTableChangeMessages(change);
      for (const c of this.#kvEventSubscribers) for (const m of out) c.send(m);
    };
  }

  #unsubscribeKvEvents(conn: Connection): void {
    this.#kvEventSubscribers.delete(conn);
    if (this.#kvEventSubscribers.size === 0) this.scheduler.blocks.onChange = undefined;
  }

  #afterApply(conn: Connection, rank: number, r: ApplyResult): void {
    if (r.applied) return;
    if (r.reason !== "stale_version") this.#log(`[control] rank ${rank}: ${r.message}`);
    if (r.requestSnapshot) conn.send({ type: "snapshot_request", reason: r.message });
  }
}

/**
 * The per-plan phase trace LMPOOL_TRACE_TRANSFERS asks for: "1" writes it to the control plane's
 * log; any other value names a file it is appended to (for runs whose engine log is off, such as
 * the e2e benchmark's configurations).
 */
function transferTrace(log: (line: string) => void): { trace?: (line: string) => void } {
  const v = readSetting("LMPOOL_TRACE_TRANSFERS");
  if (v === undefined || v === "off") return {};
  if (v === "log") return { trace: log };
  return { trace: (line) => appendText(v.file, line + "\n") };
}
