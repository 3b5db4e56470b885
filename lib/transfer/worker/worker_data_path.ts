/**
 * Opens a worker's KV data path: the host socket path (lib/transfer/paths/host/kv_peer_channel.ts) to every peer,
 * plus a direct path with each direct partner where transfers.dataPath allows it (CUDA backend):
 * - a partner on the same CUDA device gets the device-local path ("device_local"): CUDA IPC of its
 *   cache on that device, the copy a device-to-device copy on the copy engine. "auto" and "ipc"
 *   try it; NCCL cannot pair a device with itself, so "nccl" refuses such a partner, and in "auto"
 *   one whose mapping fails uses the host path.
 * - a partner on another device: "auto" prefers CUDA IPC (the source copies into the partner's
 *   cache with the copy engine; the fastest path in the transfer benchmark), then an NCCL pair,
 *   then the host path.
 * One log line per pair that falls back, naming it and the cause. Plans pick the path per peer
 * ({@link PerPeerDataPath}). On the CPU backend nothing direct is tried: no rendezvous traffic.
 * @module
 */
import { KvTransferEngine, type PeerCopyModeName } from "../../../ffi/kv_transfer.ts";
import type { KvCache } from "../../../ffi/native.ts";
import type { DataPathSetting } from "../control/transfer_config.ts";
import { DEVICE_LOCAL_PATH } from "../control/pair_data_paths.ts";
import type { HeartbeatOptions } from "../../protocol/heartbeat_monitor.ts";
import { pairName } from "../paths/direct_data_path.ts";
import { HostCopyDataPath } from "../paths/host/host_copy_data_path.ts";
import { KvPeerChannel } from "../paths/host/kv_peer_channel.ts";
import { IpcDataPath } from "../paths/ipc/ipc_data_path.ts";
import { type IpcPeerSetup, type IpcViewFactory, setUpIpcPeers } from "../paths/ipc/ipc_peer_setup.ts";
import { ipcSignalsOverChannel } from "../paths/ipc/ipc_signals.ts";
import { NcclDataPath } from "../paths/nccl/nccl_data_path.ts";
import { type NcclPairFactory, setUpNcclPairs } from "../paths/nccl/nccl_pair_setup.ts";
import { type DirectPeers, PerPeerDataPath } from "./per_peer_data_path.ts";

/** What the launcher tells a worker about its data path (from the transfer config and topology). */
export interface WorkerDataPathConfig {
  /** transfers.dataPath. */
  mode: DataPathSetting;
  /** Direct partners of this rank (NVLink, or the same CUDA device) and their CUDA devices. */
  peers: { rank: number; gpu: number }[];
  /** transfers.ncclTimeoutMs: bound on creating one pair, and on one plan's NCCL transfer. */
  ncclTimeoutMs: number;
  /** transfers.ipcTimeoutMs: bound on one plan's CUDA IPC copy (default 10000 ms). */
  ipcTimeoutMs?: number;
  /** Bound on waiting for a partner at the rendezvous (the launcher's start-up limit). */
  rendezvousTimeoutMs: number;
}

/** transfers.dataPath names one direct path ("ipc", "nccl") and a pair cannot have it. */
export class DataPathError extends Error {
  override readonly name = "DataPathError";
}

/** Options of {@link openWorkerDataPath}. */
export interface OpenWorkerDataPathOptions {
  rank: number;
  epoch: number;
  /** This worker's CUDA device. */
  gpu: number;
  backend: "cpu" | "cuda";
  kv: KvCache;
  /** Directory of the workers' KV peer sockets. */
  peerSocketDir: string;
  controlSocketPath: string;
  config?: WorkerDataPathConfig;
  heartbeat?: Partial<HeartbeatOptions> | false;
  /** NCCL pair maker (default: the native library's). */
  factory?: NcclPairFactory;
  /** CUDA IPC exporter/mapper (default: the native library's, copying with the copy engine). */
  ipcFactory?: IpcViewFactory;
  log?: (line: string) => void;
}

/** The KV peer socket of a rank. */
function peerSocketPath(dir: string, rank: number): string {
  return `${dir}/kv-${rank}.sock`;
}

const DIRECT_NAMES = { ipc: "CUDA IPC", nccl: "NCCL" } as const;

/** The partners a worker tries direct paths with: on its own CUDA device, and on other devices. */
export interface DirectPeerRanks {
  /** Partners sharing this worker's device: the device-local path. */
  sameDevice: number[];
  /** Partners on other devices: CUDA IPC and/or NCCL. */
  otherDevice: number[];
}

/**
 * The partners this worker tries direct paths with, ascending. Throws DataPathError when the mode
 * names a direct path and one partner cannot have it (CPU backend; "nccl" with a partner on this
 * worker's own device).
 */
export function directPeerRanks(
  o: { rank: number; gpu: number; backend: "cpu" | "cuda"; config?: WorkerDataPathConfig },
): DirectPeerRanks {
  const c = o.config;
  const none: DirectPeerRanks = { sameDevice: [], otherDevice: [] };
  if (!c || c.mode === "host" || c.peers.length === 0) return none;
  const strict = c.mode === "auto" ? undefined : DIRECT_NAMES[c.mode];
  if (o.backend !== "cuda") {
    if (strict) {
      throw new DataPathError(
        `transfers.dataPath is "${c.mode}" but rank ${o.rank} runs the ${o.backend} backend, which has no ${strict}`,
      );
    }
    return none;
  }
  const ranks = (same: boolean) =>
    c.peers.filter((p) => (p.gpu === o.gpu) === same).map((p) => p.rank).sort((a, b) => a - b);
  const sameDevice = ranks(true);
  if (c.mode === "nccl" && sameDevice.length > 0) {
    throw new DataPathError(
      `transfers.dataPath is "nccl" but rank ${o.rank} shares CUDA device ${o.gpu} with rank ${
        sameDevice[0]
      }; an NCCL pair needs two devices ("auto" or "ipc" copy between ranks of one device)`,
    );
  }
  return { sameDevice, otherDevice: ranks(false) };
}

/** Opens the per-peer data path; direct paths that fail fall back (or throw in a strict mode). */
export async function openWorkerDataPath(o: OpenWorkerDataPathOptions): Promise<PerPeerDataPath> {
  const log = o.log ?? ((l: string) => console.error(l));
  const { sameDevice, otherDevice } = directPeerRanks(o);
  const c = o.config;
  const dir = o.peerSocketDir;
  const channel = await KvPeerChannel.listen({
    rank: o.rank,
    socketPath: peerSocketPath(dir, o.rank),
    peerSocketPath: (r) => peerSocketPath(dir, r),
    log,
  });
  const host = new HostCopyDataPath(o.kv, channel);
  if (sameDevice.length + otherDevice.length === 0 || !c) return new PerPeerDataPath({ rank: o.rank, host, log });
  const rendezvous = {
    rank: o.rank,
    epoch: o.epoch,
    controlSocketPath: o.controlSocketPath,
    rendezvousTimeoutMs: c.rendezvousTimeoutMs,
    heartbeat: o.heartbeat,
    log,
  };
  const direct: DirectPeers[] = [];
  const strictFailure = async (failed: ReadonlyMap<number, string>, what: string) => {
    await Promise.all([...new Set(direct.map((d) => d.path))].map((p) => p?.close()));
    await channel.close();
    const list = [...failed].map(([peer, why]) => `${pairName(o.rank, peer)}: ${why}`).join("; ");
    return new DataPathError(`transfers.dataPath is "${c.mode}" but ${what} did not come up (${list})`);
  };
  // deno-lint-ignore prefer-const -- assigned once, after the callbacks that read it are made
  let perPeer: PerPeerDataPath | undefined;
  const onBroken = (peer: number, reason: string) => perPeer?.fallBack(peer, reason);

  let ncclPeers = otherDevice;
  if (c.mode === "auto" || c.mode === "ipc") {
    const factory = o.ipcFactory ?? nativeIpcFactory(new KvTransferEngine(o.kv.model.native), o.kv);
    const strictFallback = `cannot run: transfers.dataPath is "ipc", so start-up fails`;
    const none: IpcPeerSetup = { views: new Map(), failed: new Map() };
    // Both kinds of partner map each other's cache the same way; only the label and the next path differ.
    const [local, remote] = await Promise.all([
      sameDevice.length === 0 ? none : setUpIpcPeers({
        ...rendezvous,
        peers: sameDevice,
        factory,
        label: `device-local (CUDA IPC on device ${o.gpu})`,
        fallback: c.mode === "auto" ? "use the host path" : strictFallback,
      }),
      otherDevice.length === 0 ? none : setUpIpcPeers({
        ...rendezvous,
        peers: otherDevice,
        factory,
        fallback: c.mode === "auto" ? "try NCCL next" : strictFallback,
      }),
    ]);
    // One IpcDataPath serves both: its `ready`/`done` signals share the peer channel, one listener.
    const views = new Map([...local.views, ...remote.views]);
    const path = views.size > 0
      ? new IpcDataPath({
        rank: o.rank,
        blockBytes: o.kv.blockBytes,
        views,
        signals: ipcSignalsOverChannel(channel),
        timeoutMs: c.ipcTimeoutMs ?? 10_000,
        onPeerBroken: onBroken,
        log,
      })
      : undefined;
    for (const [name, setup] of [[DEVICE_LOCAL_PATH, local], ["ipc", remote]] as const) {
      const serves = path !== undefined && setup.views.size > 0;
      direct.push({ name, ...(serves ? { path } : {}), peers: setup.views.keys(), failed: setup.failed });
    }
    const failed = new Map([...local.failed, ...remote.failed]);
    if (c.mode === "ipc" && failed.size > 0) throw await strictFailure(failed, "CUDA IPC pairs");
    ncclPeers = otherDevice.filter((p) => !remote.views.has(p));
  }
  if ((c.mode === "auto" || c.mode === "nccl") && ncclPeers.length > 0) {
    const setup = await setUpNcclPairs({
      ...rendezvous,
      device: o.gpu,
      peers: ncclPeers,
      factory: o.factory ?? nativePairFactory(new KvTransferEngine(o.kv.model.native)),
      timeoutMs: c.ncclTimeoutMs,
    });
    if (c.mode === "nccl" && setup.failed.size > 0) {
      for (const p of setup.pairs.values()) p.dispose();
      throw await strictFailure(setup.failed, "NCCL pairs");
    }
    const path = setup.pairs.size > 0
      ? new NcclDataPath(o.kv, setup.pairs, { timeoutMs: c.ncclTimeoutMs, onPairBroken: onBroken })
      : undefined;
    direct.push({ name: "nccl", ...(path ? { path } : {}), peers: setup.pairs.keys(), failed: setup.failed });
  }
  perPeer = new PerPeerDataPath({ rank: o.rank, host, direct, log });
  return perPeer;
}

/** The native library's NCCL pairs as a {@link NcclPairFactory}. */
function nativePairFactory(xfer: KvTransferEngine): NcclPairFactory {
  return {
    unavailable: () => {
      const v = xfer.ncclVersion();
      return "unavailable" in v ? v.unavailable : undefined;
    },
    uniqueId: () => xfer.ncclUniqueId(),
    createPair: (uniqueId, pairRank, device, timeoutMs) => xfer.createPair(uniqueId, pairRank, device, { timeoutMs }),
  };
}

/**
 * The native library's CUDA IPC as an {@link IpcViewFactory}: exports `kv`, maps a peer's cache
 * with `kv`'s shape (on this worker's device or another), and copies into it with `mode`
 * (copyEngineDirect: the copy engine only, the fastest measured cross-process path, and on one
 * device a device-to-device copy; kernel: one kernel storing through the mapping).
 */
function nativeIpcFactory(
  xfer: KvTransferEngine,
  kv: KvCache,
  mode: PeerCopyModeName = "copyEngineDirect",
): IpcViewFactory {
  let handle: Uint8Array | undefined;
  return {
    numBlocks: kv.numBlocks,
    blockBytes: kv.blockBytes,
    // Same-device and other-device partners set up side by side; one export serves both.
    exportHandle: () => (handle ??= xfer.exportKv(kv)),
    openView: (handle, numBlocks) => {
      const view = xfer.openRemoteKv(handle, kv, numBlocks);
      return {
        numBlocks,
        copyInto: (srcIds, dstIds) => xfer.peerCopy(kv, srcIds, view, dstIds, mode),
        dispose: () => view.dispose(),
      };
    },
  };
}
