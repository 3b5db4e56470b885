/**
 * Direct partners between logical GPU ranks: NVLink pairs, from explicit pairs ("0-1,2-3") or parsed
 * from `nvidia-smi topo -m`, keeping only NV# links (never PIX/PXB/PHB/NODE/SYS), then remapped to
 * logical ids after CUDA_VISIBLE_DEVICES; and same-device pairs, two ranks on one CUDA device,
 * which copy KV between them without any link (a device-local copy), so they are partners whatever
 * the NVLink wiring says.
 * @module
 */

import { stripVTControlCharacters } from "node:util";
import { parseRankPairs, type RankPair } from "../core/rank_pairs.ts";

export type { RankPair };

/** How two direct partners are linked: NVLink between two devices, or one CUDA device they share. */
export type PairKind = "nvlink" | "same-device";

/**
 * Which ranks are direct partners (NVLink, or the same CUDA device). `devices`, when given, is the
 * CUDA device of each rank: every two ranks of one device are then partners too, of kind
 * "same-device" (a listed pair of such ranks is one as well); without it every pair is "nvlink".
 */
export class NvlinkTopology {
  readonly #partners: number[][];
  readonly #devices: readonly number[] | undefined;
  /** The pairs, each with a < b, sorted: NVLink and same-device pairs alike. */
  readonly pairs: readonly RankPair[];

  constructor(
    readonly worldSize: number,
    pairs: readonly RankPair[],
    devices?: readonly number[],
  ) {
    if (!Number.isInteger(worldSize) || worldSize < 1) {
      throw new RangeError(`worldSize must be an integer >= 1, got ${worldSize}`);
    }
    if (devices !== undefined) {
      if (devices.length !== worldSize) {
        throw new RangeError(`devices lists ${devices.length} CUDA devices for ${worldSize} ranks`);
      }
      for (const d of devices) {
        if (!Number.isInteger(d) || d < 0) throw new RangeError(`devices entries must be device indices, got ${d}`);
      }
    }
    this.#devices = devices === undefined ? undefined : [...devices];
    this.#partners = Array.from({ length: worldSize }, () => []);
    const seen = new Set<string>();
    const out: RankPair[] = [];
    for (const [x, y] of [...pairs, ...sameDevicePairs(devices ?? [])]) {
      for (const r of [x, y]) {
        if (!Number.isInteger(r) || r < 0 || r >= worldSize) {
          throw new RangeError(`NVLink pair ${x}-${y} names rank ${r}, outside 0..${worldSize - 1}`);
        }
      }
      if (x === y) throw new RangeError(`NVLink pair ${x}-${y} pairs a rank with itself`);
      const a = Math.min(x, y);
      const b = Math.max(x, y);
      if (seen.has(`${a}-${b}`)) continue;
      seen.add(`${a}-${b}`);
      out.push([a, b]);
      this.#partners[a]!.push(b);
      this.#partners[b]!.push(a);
    }
    for (const p of this.#partners) p.sort((u, v) => u - v);
    this.pairs = out.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
  }

  /** Direct partners of `rank` (NVLink or same device), ascending. */
  partners(rank: number): readonly number[] {
    return this.#partners[rank] ?? [];
  }

  /** The kind of the pair a-b, or undefined when they are not direct partners. */
  kind(a: number, b: number): PairKind | undefined {
    if (a === b || !this.#partners[a]?.includes(b)) return undefined;
    return this.#devices !== undefined && this.#devices[a] === this.#devices[b] ? "same-device" : "nvlink";
  }

  /** The pairs as "0-1,2-3", a same-device pair marked "(same device)"; "none" without pairs (for log lines). */
  describe(): string {
    if (this.pairs.length === 0) return "none";
    return this.pairs.map(([a, b]) => `${a}-${b}${this.kind(a, b) === "same-device" ? " (same device)" : ""}`).join(
      ",",
    );
  }

  /** Topology affinity: 2 for the same rank, 1 for a direct partner (NVLink or same device), 0 otherwise. */
  affinity(a: number, b: number): 0 | 1 | 2 {
    if (a === b) return 2;
    return this.#partners[a]?.includes(b) ? 1 : 0;
  }

  /** Parses explicit pairs such as "0-1,2-3" (logical ids). Empty text means no pairs. */
  static fromPairs(text: string, worldSize: number): NvlinkTopology {
    return new NvlinkTopology(worldSize, parseRankPairs(text, "NVLink pairs"));
  }

  /**
   * Builds the logical topology from `nvidia-smi topo -m` text. `visibleDevices` is the value of
   * CUDA_VISIBLE_DEVICES (physical indices in logical order); unset means all GPUs in the matrix.
   */
  static fromNvidiaSmi(text: string, visibleDevices?: string): NvlinkTopology {
    const { gpuCount, pairs } = parseNvidiaSmiTopo(text);
    const order = visibleOrder(visibleDevices, gpuCount);
    const logical = new Map(order.map((phys, i) => [phys, i]));
    const mapped: RankPair[] = [];
    for (const [a, b] of pairs) {
      const la = logical.get(a);
      const lb = logical.get(b);
      if (la !== undefined && lb !== undefined) mapped.push([la, lb]);
    }
    return new NvlinkTopology(order.length, mapped);
  }
}

/** Every two ranks that `devices` (the CUDA device of each rank) puts on one device, a < b. */
export function sameDevicePairs(devices: readonly number[]): RankPair[] {
  const out: RankPair[] = [];
  for (let a = 0; a < devices.length; a++) {
    for (let b = a + 1; b < devices.length; b++) if (devices[a] === devices[b]) out.push([a, b]);
  }
  return out;
}

/** The NV# links of a `nvidia-smi topo -m` matrix, in physical GPU indices. */
export function parseNvidiaSmiTopo(text: string): { gpuCount: number; pairs: RankPair[] } {
  // Newer drivers may colour the matrix; strip ANSI escapes first.
  const lines = stripVTControlCharacters(text).split(/\r?\n/);
  // The header's first cell is GPU0 too, but its second is a column name, where row GPU0 has "X".
  const headerIdx = lines.findIndex((l) => {
    const t = l.trim().split(/\s+/);
    return t[0] === "GPU0" && t[1] !== undefined && t[1] !== "X";
  });
  if (headerIdx < 0) {
    throw new RangeError(
      `not nvidia-smi topo -m output: no header line starting with GPU0 in ${JSON.stringify(text.slice(0, 80))}`,
    );
  }
  // Device columns (GPUn, NICn, mlx...) come first; "CPU Affinity" etc. end them.
  const header = lines[headerIdx]!.trim().split(/\s+/);
  const columns: string[] = [];
  for (const h of header) {
    if (h === "CPU" || h === "NUMA" || h === "Affinity") break;
    columns.push(h);
  }
  const gpuColumns = columns.map((c) => (/^GPU(\d+)$/.exec(c) ? Number(c.slice(3)) : -1));
  const gpuCount = gpuColumns.filter((g) => g >= 0).length;
  const pairs: RankPair[] = [];
  for (const line of lines.slice(headerIdx + 1)) {
    const cells = line.trim().split(/\s+/);
    const rowName = cells[0] ?? "";
    const m = /^GPU(\d+)$/.exec(rowName);
    if (!m) {
      if (/^Legend/i.test(rowName)) break;
      continue;
    }
    const rowGpu = Number(m[1]);
    for (let c = 0; c < columns.length; c++) {
      const cell = cells[c + 1];
      const colGpu = gpuColumns[c]!;
      if (cell === undefined || colGpu < 0 || colGpu === rowGpu) continue;
      if (/^NV\d+$/.test(cell) && rowGpu < colGpu) pairs.push([rowGpu, colGpu]);
    }
  }
  return { gpuCount, pairs };
}

/** Physical GPU indices in logical order, from CUDA_VISIBLE_DEVICES. */
function visibleOrder(visible: string | undefined, gpuCount: number): number[] {
  if (visible === undefined || visible.trim() === "") return Array.from({ length: gpuCount }, (_, i) => i);
  const out: number[] = [];
  for (const part of visible.split(",").map((s) => s.trim())) {
    if (!/^\d+$/.test(part)) {
      throw new RangeError(
        `CUDA_VISIBLE_DEVICES entry ${
          JSON.stringify(part)
        } is not a GPU index; pass explicit NVLink pairs (e.g. "0-1") instead`,
      );
    }
    const g = Number(part);
    // CUDA stops at the first invalid index; so do we.
    if (g >= gpuCount) break;
    if (out.includes(g)) throw new RangeError(`CUDA_VISIBLE_DEVICES lists GPU ${g} twice: ${JSON.stringify(visible)}`);
    out.push(g);
  }
  return out;
}
