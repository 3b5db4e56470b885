/**
 * Which data path each directed pair of workers moves K/V payloads on, as the workers report it in
 * their stats: `data_path_<name>_peer_<r>` is 1 while the peer r is served by the direct path
 * <name> (DIRECT_PATH_NAMES: the device-local copy, CUDA IPC, NCCL), 0 after it fell back. A
 * worker that reports any `data_path_*` counter and does not name a peer on a direct path reaches
 * that peer through host memory and sockets (the CPU backend always does). The cost model prices
 * them very differently: a copy within one device's memory or over NVLink takes a fraction of a
 * millisecond per block, the host path orders of magnitude longer.
 * @module
 */

/**
 * The device-local path: two ranks of one CUDA device, the source copying into the partner's
 * cache through a CUDA IPC mapping on that device (a device-to-device copy on the copy engine).
 */
export const DEVICE_LOCAL_PATH = "device_local";

/** Names of the direct paths a worker may report, in order of preference. */
export const DIRECT_PATH_NAMES = [DEVICE_LOCAL_PATH, "ipc", "nccl"] as const;

/**
 * Direct paths whose copy is one-sided (the source writes the destination's blocks through a CUDA
 * IPC mapping, only after the destination's go-ahead): a plan's phases may pipeline on them.
 */
export const ONE_SIDED_PATHS: ReadonlySet<string> = new Set([DEVICE_LOCAL_PATH, "ipc"]);

/** The data path of a pair: a direct path's name, "host", or "unknown" before any report. */
export type PairPath = { kind: "direct"; name: string } | { kind: "host" } | { kind: "unknown" };

/** `data_path_<name>_peer_<r>`; a name may hold underscores (device_local). */
const PEER_KEY = /^data_path_([a-z0-9_]+?)_peer_(\d+)$/;

/** Per-rank reports of the peers each worker reaches on a direct path. */
export class PairDataPaths {
  /** Rank -> (peer -> direct path name) from its latest report with data-path counters. */
  readonly #direct = new Map<number, Map<number, string>>();

  /** Folds in a worker's stats counters (those without `data_path_*` keys change nothing). */
  observe(rank: number, counters: Record<string, number>): void {
    let reported = false;
    const direct = new Map<number, string>();
    for (const [k, v] of Object.entries(counters)) {
      if (!k.startsWith("data_path_")) continue;
      reported = true;
      const m = PEER_KEY.exec(k);
      if (m && v === 1) direct.set(Number(m[2]), m[1]!);
    }
    if (reported) this.#direct.set(rank, direct);
  }

  /** Forgets a rank's report (it died; its successor reports again). */
  forget(rank: number): void {
    this.#direct.delete(rank);
  }

  /** The name plans from `src` to `dst` take ("host", a direct path's, or "unknown"), for counters and logs. */
  nameOf(src: number, dst: number): string {
    const p = this.pathOf(src, dst);
    return p.kind === "direct" ? p.name : p.kind;
  }

  /**
   * The path plans from `src` to `dst` take: the source's view of the destination, else the
   * destination's view of the source (both sides agree once pair health settled), else unknown.
   */
  pathOf(src: number, dst: number): PairPath {
    for (const [me, peer] of [[src, dst], [dst, src]] as const) {
      const seen = this.#direct.get(me);
      if (!seen) continue;
      const name = seen.get(peer);
      return name === undefined ? { kind: "host" } : { kind: "direct", name };
    }
    return { kind: "unknown" };
  }
}
