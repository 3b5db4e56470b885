/**
 * What the launcher derives for one worker process from the engine's options: its data-path
 * settings, its share of the host's CPU threads, and the page-table consistency check's wait.
 * @module
 */
import type { BlockSnapshot } from "../core/block_snapshot.ts";
import { GlobalBlockManager } from "../global/global_block_manager.ts";
import { diffPageTable, type PageTableDiff } from "../global/page_table_diff.ts";
import { cpuCount, readSetting } from "../runtime/env.ts";
import type { WorkerDataPathConfig } from "../transfer/worker/worker_data_path.ts";
import type { RankPair } from "../global/topology.ts";
import type { TransferConfig } from "../transfer/control/transfer_config.ts";
import { DEFAULT_GPU_MEMORY_UTILIZATION } from "../local/engine_builder.ts";

/** What a worker's data-path settings are derived from. */
export interface DataPathSource {
  transfers: TransferConfig;
  pairs: RankPair[];
  gpus: number[];
  startTimeoutMs: number;
}

/**
 * A worker's data-path settings: the transfer config's choice, its direct partners (the topology's
 * pairs: NVLink, and ranks sharing its device) and their devices.
 */
export function workerDataPath(o: DataPathSource, rank: number): WorkerDataPathConfig {
  const t = o.transfers;
  const partners = o.pairs.flatMap(([a, b]) => (a === rank ? [b] : b === rank ? [a] : []));
  return {
    mode: t.dataPath,
    peers: partners.map((p) => ({ rank: p, gpu: o.gpus[p]! })),
    ncclTimeoutMs: t.ncclTimeoutMs,
    ipcTimeoutMs: t.ipcTimeoutMs,
    // Waiting longer for a partner than start-up may take is pointless: start-up fails then.
    rendezvousTimeoutMs: o.startTimeoutMs,
  };
}

/**
 * CPU-backend workers share the host's cores: unless the user chose OMP_NUM_THREADS, each gets its
 * share, since oversubscribed OpenMP threads make a step slower than one thread does. CUDA workers
 * do not use OpenMP, so it costs them nothing.
 */
export function workerThreadEnv(workers: number): Record<string, string> {
  if (readSetting("OMP_NUM_THREADS") !== undefined) return {};
  return { OMP_NUM_THREADS: String(Math.max(1, Math.floor(cpuCount() / Math.max(1, workers)))) };
}

/**
 * Compares the control plane's page table (`dump`) with the workers' fresh snapshots until they
 * match, the table has caught up with every snapshot's version, or `timeoutMs` passes: the control
 * plane applies the workers' snapshots asynchronously.
 */
export async function awaitPageTableMatch(
  snaps: BlockSnapshot[],
  timeoutMs: number,
  dump: () => Promise<BlockSnapshot[]>,
): Promise<PageTableDiff> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const table = new GlobalBlockManager();
    for (const s of await dump()) table.applySnapshot(s);
    const diff = diffPageTable(table, snaps);
    const caughtUp = snaps.every((s) =>
      (table.table(s.rank)?.version ?? -1) >= s.version && table.table(s.rank)?.epoch === s.epoch
    );
    if (diff.equal || caughtUp || Date.now() > deadline) return diff;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The engine options a rank that shares its device with k - 1 others starts with: a 1/k share of
 * the device's memory for weights and KV. Its memory fraction counts the ranks of that device
 * already running (`running(r)`), whose memory it sees as used; an explicit block count needs none.
 */
export function deviceShare(
  gpus: readonly number[],
  rank: number,
  running: (rank: number) => boolean,
  engine: { gpuMemoryUtilization?: number; numBlocks?: number },
): { gpuMemoryUtilization?: number } {
  const gpu = gpus[rank];
  const sharing = gpus.filter((g) => g === gpu).length;
  if (sharing <= 1 || engine.numBlocks !== undefined) return {};
  const others = gpus.filter((g, r) => g === gpu && r !== rank && running(r)).length;
  const util = engine.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION;
  return { gpuMemoryUtilization: (util * (others + 1)) / sharing };
}
