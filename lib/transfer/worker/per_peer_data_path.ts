/**
 * A worker's {@link KvDataPath} chosen per peer rank: a direct device path for the peers it came up
 * with at start-up (in order of preference, e.g. the device-local copy "device_local" for a partner
 * on the same device, CUDA IPC mappings "ipc", then NCCL pairs "nccl"; one path object may serve
 * under two names),
 * the host socket path for every other peer. A peer whose direct path breaks (a plan timed out or
 * was cancelled after posting, a copy failed, or the partner dropped its end) falls back to the host
 * path for the rest of the run: logged once, counted, and reported through onFallback so the worker
 * can tell the control plane. A plan already under way on the broken path fails; the next plan uses
 * the host path.
 * @module
 */
import { type DirectDataPath, pairName } from "../paths/direct_data_path.ts";
import type { KvDataPath, KvTransferJob } from "../paths/kv_data_path.ts";
import { DIRECT_PATH_NAMES } from "../control/pair_data_paths.ts";

/** One direct path of a {@link PerPeerDataPath} and the peers it was tried for. */
export interface DirectPeers {
  /** Name in counters and log lines ("device_local", "ipc", "nccl"). */
  name: string;
  /** Absent when it came up with no peer. */
  path?: DirectDataPath;
  /** Peers the direct path serves. */
  peers: Iterable<number>;
  /** Peers it was tried for and could not serve, with the cause. */
  failed?: ReadonlyMap<number, string>;
}

/** Options of a {@link PerPeerDataPath}. */
export interface PerPeerDataPathOptions {
  rank: number;
  host: KvDataPath;
  /** Direct paths in order of preference: a peer takes the first that serves it. */
  direct?: readonly DirectPeers[];
  log?: (line: string) => void;
}

/** Whether this worker's direct path to one peer is up (what it reports to the control plane). */
export interface DirectPeerStatus {
  peerRank: number;
  ok: boolean;
  error?: string;
}

/** Dispatches each plan to the direct path of its peer, or to the host path. */
export class PerPeerDataPath implements KvDataPath {
  /** Called once per peer that falls back to the host path at run time. */
  onFallback: (peerRank: number, reason: string) => void = () => {};
  readonly #o: PerPeerDataPathOptions;
  readonly #log: (line: string) => void;
  readonly #direct: readonly DirectPeers[];
  /** Peer -> the direct path it uses now. */
  readonly #up = new Map<number, DirectPeers>();
  /** Peers tried by each direct path. */
  readonly #tried = new Map<string, Set<number>>();
  readonly #down = new Map<number, string>();
  readonly #bytes = new Map<string, number>();
  #fallbacks = 0;

  constructor(o: PerPeerDataPathOptions) {
    this.#o = o;
    this.#log = o.log ?? ((l) => console.error(l));
    this.#direct = o.direct ?? [];
    for (const d of this.#direct) {
      const tried = new Set<number>();
      this.#tried.set(d.name, tried);
      for (const p of d.peers) {
        tried.add(p);
        if (d.path && !this.#up.has(p)) this.#up.set(p, d);
      }
      for (const p of d.failed?.keys() ?? []) tried.add(p);
    }
    for (const d of this.#direct) {
      for (const [p, why] of d.failed ?? []) {
        if (this.#up.has(p)) continue;
        const before = this.#down.get(p);
        this.#down.set(p, `${before === undefined ? "" : `${before}; `}${d.name}: ${why}`);
      }
    }
  }

  get blockBytes(): number {
    return this.#o.host.blockBytes;
  }

  /** The path plans with `peer` take now: a direct path's name, or "host". */
  pathOf(peer: number): string {
    return this.#up.get(peer)?.name ?? "host";
  }

  receivesAtPrepare(peer: number): boolean {
    return this.#up.get(peer)?.path?.receivesAtPrepare?.(peer) ?? false;
  }

  send(job: KvTransferJob): Promise<number> {
    return this.#run(job, "sent");
  }

  receive(job: KvTransferJob): Promise<number> {
    return this.#run(job, "received");
  }

  cancel(planId: string, reason: string): void {
    // The plan may be on any path (or not started): all forget it.
    for (const p of this.#paths()) p.cancel(planId, reason);
    this.#o.host.cancel(planId, reason);
  }

  async close(): Promise<void> {
    await Promise.all([...[...this.#paths()].map((p) => p.close()), this.#o.host.close()]);
  }

  /** Each direct path object once (one may serve under two names). */
  #paths(): Set<DirectDataPath> {
    return new Set(this.#direct.flatMap((d) => (d.path ? [d.path] : [])));
  }

  /** Moves `peer` to the host path for good (idempotent); its direct path drops its end. */
  fallBack(peer: number, reason: string): void {
    const d = this.#up.get(peer);
    if (!d) return;
    this.#up.delete(peer);
    this.#down.set(peer, `${d.name}: ${reason}`);
    this.#fallbacks++;
    this.#log(
      `[worker ${this.#o.rank}] ${d.name} pair ${
        pairName(this.#o.rank, peer)
      } broke; plans with rank ${peer} use the host path from now on: ${reason}`,
    );
    d.path?.dropPeer(peer, reason);
    this.onFallback(peer, reason);
  }

  /** Every peer a direct path was tried for: up, or down with the causes. */
  status(): DirectPeerStatus[] {
    const up = [...this.#up.keys()].map((peerRank) => ({ peerRank, ok: true }));
    const down = [...this.#down].map(([peerRank, error]) => ({ peerRank, ok: false, error }));
    return [...up, ...down].sort((a, b) => a.peerRank - b.peerRank);
  }

  /**
   * Stats counters, for every direct path name (pair_data_paths.ts DIRECT_PATH_NAMES and those given):
   * `data_path_<name>_peers` (peers on it now), `data_path_<name>_peer_<r>` (1 on it, 0 fallen back
   * or never up, for each peer it was tried for), `data_path_fallbacks`, and payload bytes per path
   * and side (`data_path_<path>_sent_bytes`, `data_path_<path>_received_bytes`, host included).
   */
  counters(): Record<string, number> {
    const names = [...new Set([...DIRECT_PATH_NAMES, ...this.#direct.map((d) => d.name)])];
    const out: Record<string, number> = { data_path_fallbacks: this.#fallbacks };
    for (const name of names) {
      const on = [...this.#up.values()].filter((d) => d.name === name).length;
      out[`data_path_${name}_peers`] = on;
      for (const p of [...(this.#tried.get(name) ?? [])].sort((a, b) => a - b)) {
        out[`data_path_${name}_peer_${p}`] = this.#up.get(p)?.name === name ? 1 : 0;
      }
    }
    for (const path of [...names, "host"]) {
      for (const side of ["sent", "received"]) {
        out[`data_path_${path}_${side}_bytes`] = this.#bytes.get(`${path}_${side}`) ?? 0;
      }
    }
    return out;
  }

  async #run(job: KvTransferJob, side: "sent" | "received"): Promise<number> {
    const d = this.#up.get(job.peerRank);
    const path = d?.path ?? this.#o.host;
    const bytes = await (side === "sent" ? path.send(job) : path.receive(job));
    const k = `${d ? d.name : "host"}_${side}`;
    this.#bytes.set(k, (this.#bytes.get(k) ?? 0) + bytes);
    return bytes;
  }
}
