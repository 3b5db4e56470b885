/**
 * Opens a worker's KV data path: the host socket path (lib/local/kv_peer_channel.ts) to every peer,
 * plus an NCCL pair with each direct NVLink partner where transfers.dataPath allows it, the backend
 * is cuda and the partner runs on another device. Plans pick the path per peer
 * ({@link PerPeerDataPath}). On the CPU backend NCCL is skipped entirely: no rendezvous traffic.
 * @module
 */
import { KvTransferEngine } from "../../ffi/kv_transfer.ts";
import type { KvCache } from "../../ffi/native.ts";
import type { DataPathSetting } from "../global/transfer_config.ts";
import type { HeartbeatOptions } from "../protocol/heartbeat_monitor.ts";
import { HostCopyDataPath } from "./kv_data_path.ts";
import { KvPeerChannel } from "./kv_peer_channel.ts";
import { NcclDataPath } from "./nccl_data_path.ts";
import { setUpNcclPairs, type NcclPairFactory } from "./nccl_pair_setup.ts";
import { pairName, PerPeerDataPath } from "./per_peer_data_path.ts";

/** What the launcher tells a worker about its data path (from the transfer config and topology). */
export interface WorkerDataPathConfig {
  /** transfers.dataPath. */
  mode: DataPathSetting;
  /** Direct NVLink partners of this rank and their CUDA devices. */
  peers: { rank: number; gpu: number }[];
  /** transfers.ncclTimeoutMs: bound on creating one pair, and on one plan's NCCL transfer. */
  ncclTimeoutMs: number;
  /** Bound on waiting for a partner at the rendezvous (the launcher's start-up limit). */
  rendezvousTimeoutMs: number;
}

/** transfers.dataPath is "nccl" and a pair cannot come up. */
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
  log?: (line: string) => void;
}

/** The KV peer socket of a rank. */
export function peerSocketPath(dir: string, rank: number): string {
  return `${dir}/kv-${rank}.sock`;
}

/**
 * The partners this worker tries NCCL pairs with. Throws DataPathError when the mode is "nccl" and
 * one cannot have a pair (CPU backend, shared device).
 */
export function ncclPeerRanks(o: { rank: number; gpu: number; backend: "cpu" | "cuda"; config?: WorkerDataPathConfig }): number[] {
  const c = o.config;
  if (!c || c.mode === "host" || c.peers.length === 0) return [];
  if (o.backend !== "cuda") {
    if (c.mode === "nccl") throw new DataPathError(`transfers.dataPath is "nccl" but rank ${o.rank} runs the ${o.backend} backend, which has no NCCL`);
    return [];
  }
  const shared = c.peers.filter((p) => p.gpu === o.gpu);
  if (c.mode === "nccl" && shared.length > 0) {
    throw new DataPathError(`transfers.dataPath is "nccl" but rank ${o.rank} shares CUDA device ${o.gpu} with rank ${shared[0]!.rank}; an NCCL pair needs two devices`);
  }
  return c.peers.filter((p) => p.gpu !== o.gpu).map((p) => p.rank).sort((a, b) => a - b);
}

/** Opens the per-peer data path; NCCL failures fall back to the host path (or throw in "nccl" mode). */
export async function openWorkerDataPath(o: OpenWorkerDataPathOptions): Promise<PerPeerDataPath> {
  const log = o.log ?? ((l: string) => console.error(l));
  const peers = ncclPeerRanks(o);
  if (o.backend === "cuda" && o.config?.mode === "auto") {
    for (const p of o.config.peers.filter((q) => q.gpu === o.gpu)) log(`[worker ${o.rank}] no NCCL pair ${pairName(o.rank, p.rank)}: both ranks run on CUDA device ${o.gpu}; plans with rank ${p.rank} use the host path`);
  }
  const dir = o.peerSocketDir;
  const channel = await KvPeerChannel.listen({ rank: o.rank, socketPath: peerSocketPath(dir, o.rank), peerSocketPath: (r) => peerSocketPath(dir, r), log });
  const host = new HostCopyDataPath(o.kv, channel);
  if (peers.length === 0) return new PerPeerDataPath({ rank: o.rank, host, log });
  const c = o.config!;
  const setup = await setUpNcclPairs({
    rank: o.rank,
    epoch: o.epoch,
    device: o.gpu,
    peers,
    controlSocketPath: o.controlSocketPath,
    factory: o.factory ?? nativePairFactory(new KvTransferEngine(o.kv.model.native)),
    timeoutMs: c.ncclTimeoutMs,
    rendezvousTimeoutMs: c.rendezvousTimeoutMs,
    heartbeat: o.heartbeat,
    log,
  });
  if (c.mode === "nccl" && setup.failed.size > 0) {
    for (const p of setup.pairs.values()) p.dispose();
    await channel.close();
    const list = [...setup.failed].map(([peer, why]) => `${pairName(o.rank, peer)}: ${why}`).join("; ");
    throw new DataPathError(`transfers.dataPath is "nccl" but NCCL pairs did not come up (${list})`);
  }
  let perPeer: PerPeerDataPath | undefined;
  const nccl = new NcclDataPath(o.kv, setup.pairs, { timeoutMs: c.ncclTimeoutMs, onPairBroken: (peer, reason) => perPeer?.fallBack(peer, reason) });
  perPeer = new PerPeerDataPath({ rank: o.rank, host, direct: { path: nccl, peers: setup.pairs.keys(), failed: setup.failed }, log });
  return perPeer;
}

/** The native library's NCCL pairs as a {@link NcclPairFactory}. */
export function nativePairFactory(xfer: KvTransferEngine): NcclPairFactory {
  return {
    unavailable: () => {
      const v = xfer.ncclVersion();
      return "unavailable" in v ? v.unavailable : undefined;
    },
    uniqueId: () => xfer.ncclUniqueId(),
    createPair: (uniqueId, pairRank, device, timeoutMs) => xfer.createPair(uniqueId, pairRank, device, { timeoutMs }),
  };
}
