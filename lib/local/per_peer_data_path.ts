/**
 * A worker's {@link KvDataPath} chosen per peer rank: a direct device path (NCCL pairs, named
 * "nccl") for the peers whose pair came up at start-up, the host socket path for every other peer.
 * A peer whose direct path breaks (a plan timed out or was cancelled after posting, or the partner
 * dropped its end) falls back to the host path for the rest of the run: logged once, counted, and
 * reported through onFallback so the worker can tell the control plane. A plan already posted on the
 * broken path fails (its partner posted the matching half there); the next plan uses the host path.
 * @module
 */
import type { KvDataPath, KvTransferJob } from "./kv_data_path.ts";

/** A direct path that can give up one peer (NcclDataPath). */
export interface DirectDataPath extends KvDataPath {
  dropPeer(peer: number, reason: string): void;
}

/** The direct path of a {@link PerPeerDataPath}. */
export interface DirectPeers {
  path: DirectDataPath;
  /** Peers the direct path serves. */
  peers: Iterable<number>;
  /** Peers it was tried for and could not serve, with the cause. */
  failed?: ReadonlyMap<number, string>;
}

/** Options of a {@link PerPeerDataPath}. */
export interface PerPeerDataPathOptions {
  rank: number;
  host: KvDataPath;
  direct?: DirectPeers;
  /** Name of the direct path in counters and log lines (default "nccl"). */
  directName?: string;
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
  readonly #name: string;
  readonly #up = new Set<number>();
  readonly #down = new Map<number, string>();
  readonly #bytes = new Map<string, number>();
  #fallbacks = 0;

  constructor(o: PerPeerDataPathOptions) {
    this.#o = o;
    this.#log = o.log ?? ((l) => console.error(l));
    this.#name = o.directName ?? "nccl";
    for (const p of o.direct?.peers ?? []) this.#up.add(p);
    for (const [p, why] of o.direct?.failed ?? []) if (!this.#up.has(p)) this.#down.set(p, why);
  }

  get blockBytes(): number {
    return this.#o.host.blockBytes;
  }

  /** The path plans with `peer` take now: the direct path's name, or "host". */
  pathOf(peer: number): string {
    return this.#up.has(peer) ? this.#name : "host";
  }

  send(job: KvTransferJob): Promise<number> {
    return this.#run(job, "sent");
  }

  receive(job: KvTransferJob): Promise<number> {
    return this.#run(job, "received");
  }

  cancel(planId: string, reason: string): void {
    // The plan may be on either path (or not started): both forget it.
    this.#o.direct?.path.cancel(planId, reason);
    this.#o.host.cancel(planId, reason);
  }

  async close(): Promise<void> {
    await Promise.all([this.#o.direct?.path.close(), this.#o.host.close()]);
  }

  /** Moves `peer` to the host path for good (idempotent); the direct path drops its end. */
  fallBack(peer: number, reason: string): void {
    if (!this.#up.delete(peer)) return;
    this.#down.set(peer, reason);
    this.#fallbacks++;
    this.#log(`[worker ${this.#o.rank}] ${this.#name} pair ${pairName(this.#o.rank, peer)} broke; plans with rank ${peer} use the host path from now on: ${reason}`);
    this.#o.direct!.path.dropPeer(peer, reason);
    this.onFallback(peer, reason);
  }

  /** Every peer the direct path was tried for: up, or down with the cause. */
  status(): DirectPeerStatus[] {
    const up = [...this.#up].map((peerRank) => ({ peerRank, ok: true }));
    const down = [...this.#down].map(([peerRank, error]) => ({ peerRank, ok: false, error }));
    return [...up, ...down].sort((a, b) => a.peerRank - b.peerRank);
  }

  /**
   * Stats counters: `data_path_<name>_peers` (peers on the direct path now), `data_path_<name>_peer_<r>`
   * (1 on it, 0 fallen back or never up), `data_path_fallbacks`, and payload bytes per path and side
   * (`data_path_<path>_sent_bytes`, `data_path_<path>_received_bytes`).
   */
  counters(): Record<string, number> {
    const name = this.#name;
    const out: Record<string, number> = { [`data_path_${name}_peers`]: this.#up.size, data_path_fallbacks: this.#fallbacks };
    for (const s of this.status()) out[`data_path_${name}_peer_${s.peerRank}`] = s.ok ? 1 : 0;
    for (const path of [name, "host"]) for (const side of ["sent", "received"]) out[`data_path_${path}_${side}_bytes`] = this.#bytes.get(`${path}_${side}`) ?? 0;
    return out;
  }

  async #run(job: KvTransferJob, side: "sent" | "received"): Promise<number> {
    const direct = this.#up.has(job.peerRank) ? this.#o.direct! : undefined;
    const path = direct?.path ?? this.#o.host;
    const bytes = await (side === "sent" ? path.send(job) : path.receive(job));
    const k = `${direct ? this.#name : "host"}_${side}`;
    this.#bytes.set(k, (this.#bytes.get(k) ?? 0) + bytes);
    return bytes;
  }
}

/** "a-b" with the lower rank first. */
export function pairName(a: number, b: number): string {
  return `${Math.min(a, b)}-${Math.max(a, b)}`;
}
