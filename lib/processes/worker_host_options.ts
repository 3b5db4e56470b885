/**
 * What a WorkerHost (worker_host.ts) is built from: its rank, engine, connections and transfer parts, and
 * the contract it holds with its per-peer data path.
 * @module
 */
import type { LocalEngine } from "../local/local_engine.ts";
import type { Connection } from "../protocol/connection.ts";
import type { HeartbeatOptions } from "../protocol/heartbeat_monitor.ts";
import type { DirectPeerStatus } from "../transfer/worker/per_peer_data_path.ts";
import type { TransferExecutor } from "../transfer/worker/transfer_executor.ts";

/** Options of a WorkerHost. */
export interface WorkerHostOptions {
  rank: number;
  epoch: number;
  pid: number;
  /** Created with this rank and epoch: its block snapshots and deltas go to the control plane as they are. */
  engine: LocalEngine;
  /** Connected and greeted launcher connection. */
  launcher: Connection;
  controlSocketPath: string;
  /** Worker side of KV transfer plans; without it transfer phases are refused. */
  transfers?: TransferExecutor;
  /** The per-peer data path (lib/transfer/worker/per_peer_data_path.ts): its counters, direct pair health and fallback. */
  dataPath?: PeerDataPathControl;
  heartbeat?: Partial<HeartbeatOptions> | false;
  /** Minimum ms between stats pushes to the launcher (default 500). */
  statsIntervalMs?: number;
  /**
   * After its last step, the worker keeps its event loop turning this long (default 0) before it
   * sleeps in the I/O poller: a control message that arrives meanwhile (the next request, a
   * transfer phase) is read without paying a wake-up from the poller. Costs a core while it lasts.
   */
  idleSpinMs?: number;
  log?: (line: string) => void;
  /** Called once when the worker must end (launcher gone, shutdown, engine failure). */
  onExit: (code: number, why: string) => void;
}

/** What the worker host reads from and tells its per-peer data path. */
export interface PeerDataPathControl {
  /** Stats counters merged into the worker's stats. */
  counters(): Record<string, number>;
  /** Health of each direct pair (CUDA IPC or NCCL) tried at start-up (reported to the control plane on every connect). */
  status(): DirectPeerStatus[];
  /** Moves a peer to the host path (the control plane says the partner dropped the pair). */
  fallBack(peerRank: number, reason: string): void;
  /** Set by the host: a peer fell back at run time. */
  onFallback: (peerRank: number, reason: string) => void;
}
