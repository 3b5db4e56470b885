/**
 * Where a simulated cluster's ranks run and how their GPUs are linked: `gpus` GPUs with
 * `ranksPerGpu` ranks each (rank r on GPU floor(r / ranksPerGpu)); GPUs linked as NVLink pairs
 * (0-1, 2-3, ...: a host of paired GPUs), all to all (an NVSwitch host), or not at all. Ranks are
 * transfer partners when their GPUs are linked, and ranks of one GPU when the device-local copy is
 * on. A payload's time comes from the transfer figures of its path.
 * @module
 */
import { NvlinkTopology, type RankPair } from "../../lib/global/topology.ts";
import { type TransferDefaults, transferMs } from "../calibration/transfer_defaults.ts";
import type { PayloadCost } from "./simulated_data_path.ts";

/** How GPUs are linked. */
export type LinkKind = "pairs" | "all" | "none";

/** Names of {@link LinkKind}, for the command line. */
export const LINK_KINDS: readonly LinkKind[] = ["pairs", "all", "none"];

/** Cost of a copy between two ranks of one GPU: a fixed dispatch plus bytes at device-to-device speed. */
export interface DeviceLocalCopy {
  latencyMs: number;
  bytesPerMs: number;
}

/**
 * Default device-local copy, fitted to lmpool's plans between two ranks on one H200 in the
 * validation runs (their transfer tables in bench/results): a plan's fixed cost dominates, and the
 * bytes move far below the HBM's copy speed, because the copy engine shares the device with both
 * ranks' steps.
 */
export const DEFAULT_DEVICE_LOCAL_COPY: DeviceLocalCopy = { latencyMs: 1.9, bytesPerMs: 1.0e8 };

/** Ranks, links and payload costs of a simulated cluster. */
export interface ClusterLayout {
  rankGpus: number[];
  topology: NvlinkTopology;
  payloadCost: PayloadCost;
}

/** Builds the layout; a RangeError names a bad count. */
export function clusterLayout(o: {
  gpus: number;
  ranksPerGpu: number;
  links: LinkKind;
  deviceLocalCopy: DeviceLocalCopy | null;
  transfer: TransferDefaults;
}): ClusterLayout {
  for (const [k, v] of [["--gpus", o.gpus], ["--ranks-per-gpu", o.ranksPerGpu]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`${k} must be a positive integer, got ${v}`);
  }
  const K = o.ranksPerGpu;
  const rankGpus = Array.from({ length: o.gpus * K }, (_, r) => Math.floor(r / K));
  const linked = (g: number, h: number) =>
    g !== h && (o.links === "all" || (o.links === "pairs" && Math.floor(g / 2) === Math.floor(h / 2)));
  const pairs: RankPair[] = [];
  for (let a = 0; a < rankGpus.length; a++) {
    for (let b = a + 1; b < rankGpus.length; b++) if (linked(rankGpus[a]!, rankGpus[b]!)) pairs.push([a, b]);
  }
  const local = o.deviceLocalCopy;
  // With the device list the topology adds the same-device pairs itself, as LLMEngine's does.
  return {
    rankGpus,
    topology: new NvlinkTopology(rankGpus.length, pairs, local ? rankGpus : undefined),
    payloadCost: {
      ms: (src, dst, bytes) =>
        rankGpus[src] === rankGpus[dst] && local
          ? local.latencyMs + bytes / local.bytesPerMs
          : transferMs(o.transfer, bytes),
      pathName: (src, dst) => (rankGpus[src] === rankGpus[dst] ? "device_local" : "ipc"),
    },
  };
}
