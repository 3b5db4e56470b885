// An in-process transfer cluster: N workers, each a real BlockManager, a host-memory KV store in
// the packed layout, a KvPeerChannel on its own Unix socket (or, with dataPath "ipc", the CUDA IPC
// path's logic over views of the other workers' stores) and a TransferExecutor; one
// GlobalBlockManager fed by the workers' real snapshots/deltas; one TransferCoordinator whose link
// calls the executors. Used by the transaction, fault and concurrency tests.
import { type BlockHash, prefixBlockHashes } from "../../../lib/core/block_hash.ts";
import { type Clock, realClock } from "../../../lib/core/clock.ts";
import type { BlockEntry } from "../../../lib/core/block_snapshot.ts";
import { GlobalBlockManager } from "../../../lib/global/global_block_manager.ts";
import {
  type CoordinatorPhase,
  type PhaseMessage,
  TransferCoordinator,
} from "../../../lib/transfer/control/transfer_coordinator.ts";
import { resolveTransferConfig } from "../../../lib/transfer/control/transfer_config.ts";
import { TransferCostModel } from "../../../lib/transfer/control/transfer_cost_model.ts";
import type { PlanCandidate, TransferPlan } from "../../../lib/transfer/control/transfer_plan.ts";
import { BlockManager } from "../../../lib/local/block_manager.ts";
import { IpcDataPath, type IpcPeerView } from "../../../lib/transfer/paths/ipc/ipc_data_path.ts";
import { HostCopyDataPath } from "../../../lib/transfer/paths/host/host_copy_data_path.ts";
import type { KvDataPath, PackedKvStore } from "../../../lib/transfer/paths/kv_data_path.ts";
import { KvPeerChannel } from "../../../lib/transfer/paths/host/kv_peer_channel.ts";
import { PerPeerDataPath } from "../../../lib/transfer/worker/per_peer_data_path.ts";
import {
  TransferExecutor,
  type TransferFaultHook,
  type TransferPhaseMessage,
} from "../../../lib/transfer/worker/transfer_executor.ts";
import { tempSocketPath } from "../../../lib/runtime/unix_socket.ts";
import { makeSeq, prefill } from "../local/fixtures.ts";
import { SignalNetwork } from "./paths/ipc/fake_ipc.ts";

export const BS = 4;
const IDLE = { numRunning: 0, numWaiting: 0, runningTokens: 0, waitingTokens: 0 };

/** K/V of numBlocks blocks in [L, 2, numBlocks, chunk] bytes; gather packs [L, 2, B, chunk]. */
export class HostKvStore implements PackedKvStore {
  readonly data: Uint8Array;
  readonly blockBytes: number;
  constructor(
    readonly numBlocks: number,
    readonly layers = 2,
    readonly chunk = 24,
  ) {
    this.data = new Uint8Array(layers * 2 * numBlocks * chunk);
    this.blockBytes = layers * 2 * chunk;
  }
  #offset(lw: number, block: number): number {
    return (lw * this.numBlocks + block) * this.chunk;
  }
  gather(ids: Int32Array): Uint8Array {
    const out = new Uint8Array(ids.length * this.blockBytes);
    for (let lw = 0; lw < this.layers * 2; lw++) {
      ids.forEach((b, i) =>
        out.set(
          this.data.subarray(this.#offset(lw, b), this.#offset(lw, b) + this.chunk),
          (lw * ids.length + i) * this.chunk,
        )
      );
    }
    return out;
  }
  scatter(ids: Int32Array, packed: Uint8Array): void {
    for (let lw = 0; lw < this.layers * 2; lw++) {
      ids.forEach((b, i) =>
        this.data.set(
          packed.subarray((lw * ids.length + i) * this.chunk, (lw * ids.length + i + 1) * this.chunk),
          this.#offset(lw, b),
        )
      );
    }
  }
  /** Bytes of one block, all layers (for comparisons). */
  blockContent(b: number): number[] {
    return [...this.gather(Int32Array.of(b))];
  }
}

/** One in-process worker. */
export interface TestWorker {
  rank: number;
  bm: BlockManager;
  kv: HostKvStore;
  channel: KvPeerChannel;
  executor: TransferExecutor;
  /** With dataPath "ipc": the signal network, whose log shows each ready and done. */
  signals?: SignalNetwork;
}

/** Everything a transfer test observes about one worker. */
export interface WorkerState {
  free: number;
  reclaimable: number;
  reserved: number;
  live: number;
  pins: number;
  published: string[];
}

/** A cluster of in-process workers with a page table and a coordinator. */
export interface TestCluster {
  workers: TestWorker[];
  table: GlobalBlockManager;
  coordinator: TransferCoordinator;
  /** Messages the link delivered, in order. */
  /** Phase messages in sending order, each with the acks of its plan answered before it was sent ("type@rank"). */
  sent: { rank: number; type: string; planId: string; answeredBefore: string[] }[];
  /** Pushes every worker's pending delta into the page table. */
  report(): void;
  state(rank: number): WorkerState;
  /** The page table's entries of a rank, comparable across time. */
  tableEntries(rank: number): string[];
  close(): Promise<void>;
}

/** Options of {@link makeCluster}. */
export interface ClusterOptions {
  ranks?: number;
  numBlocks?: number;
  faults?: (rank: number) => TransferFaultHook | undefined;
  beforePhase?: (plan: TransferPlan, phase: CoordinatorPhase) => void | Promise<void>;
  /** Links that drop messages to a rank (never answer): simulates a lost worker. */
  silent?: (rank: number, m: PhaseMessage) => boolean;
  /** The page table to feed (default: a new one). */
  table?: GlobalBlockManager;
  /** The coordinator's per-plan phase trace (see TransferCoordinatorOptions.trace). */
  trace?: (line: string) => void;
  /** Send execute and publish behind prepare (default true, as the control plane does on the host path). */
  pipelinePhases?: boolean;
  /** Stamp acks with handledMs and receivedAt, as a worker host does (default false). */
  stampAcks?: boolean;
  /**
   * "host" (default): payloads over the workers' sockets. "ipc": every pair direct over the CUDA
   * IPC path's logic (IpcDataPath behind a PerPeerDataPath, as a GPU worker runs it), its copies
   * done by {@link StoreView}s and its signals on an in-memory {@link SignalNetwork}.
   */
  dataPath?: "host" | "ipc";
  /** The coordinator's and the executors' clock (default the real one). */
  clock?: Clock;
}

/** A mapping of `to`'s store from the worker owning `from`: a copy lands when waited for. */
class StoreView implements IpcPeerView {
  constructor(
    readonly from: HostKvStore,
    readonly to: HostKvStore,
  ) {}
  get numBlocks(): number {
    return this.to.numBlocks;
  }
  copyInto(srcIds: Int32Array, dstIds: Int32Array) {
    let landed = false;
    const land = () => {
      if (!landed) {
        srcIds.forEach((s, i) => this.to.scatter(Int32Array.of(dstIds[i]!), this.from.gather(Int32Array.of(s))));
      }
      landed = true;
    };
    return { wait: async () => (land(), true), dispose: () => {} };
  }
  dispose(): void {}
}

const entryKey = (e: Pick<BlockEntry, "hash" | "block" | "generation" | "refCount">) =>
  `${e.hash}@${e.block}g${e.generation}r${e.refCount}`;

export async function makeCluster(o: ClusterOptions = {}): Promise<TestCluster> {
  const n = o.ranks ?? 2;
  const paths = Array.from({ length: n }, (_, r) => tempSocketPath(`kv${r}`));
  const table = o.table ?? new GlobalBlockManager();
  const numBlocks = o.numBlocks ?? 32;
  const stores = Array.from({ length: n }, () => new HostKvStore(numBlocks));
  const signals = o.dataPath === "ipc" ? new SignalNetwork() : undefined;
  const workers: TestWorker[] = [];
  for (let rank = 0; rank < n; rank++) {
    const bm = new BlockManager({ numBlocks, blockSize: BS, rank, epoch: 7 });
    const kv = stores[rank]!;
    const channel = await KvPeerChannel.listen({
      rank,
      socketPath: paths[rank]!,
      peerSocketPath: (r) => paths[r]!,
      log: () => {},
    });
    const host = new HostCopyDataPath(kv, channel);
    let dataPath: KvDataPath = host;
    if (signals) {
      const peers = stores.map((_, r) => r).filter((r) => r !== rank);
      const ipc = new IpcDataPath({
        rank,
        blockBytes: kv.blockBytes,
        views: new Map(peers.map((r) => [r, new StoreView(kv, stores[r]!)])),
        signals: signals.line(rank),
        timeoutMs: 1000,
        log: () => {},
      });
      dataPath = new PerPeerDataPath({ rank, host, direct: [{ name: "ipc", path: ipc, peers }], log: () => {} });
    }
    const executor = new TransferExecutor({
      rank,
      epoch: 7,
      blocks: bm,
      dataPath,
      faults: o.faults?.(rank),
      clock: o.clock,
    });
    workers.push({ rank, bm, kv, channel, executor, ...(signals ? { signals } : {}) });
    table.applySnapshot(bm.snapshot(IDLE));
  }
  const report = () => {
    for (const w of workers) {
      const d = w.bm.takeDelta(IDLE);
      if (d) {
        const r = table.applyDelta(d);
        if (!r.applied) throw new Error(`delta of rank ${w.rank} rejected: ${r.message}`);
      }
    }
  };
  for (const w of workers) w.executor.onChange = report;
  const sent: TestCluster["sent"] = [];
  const answered = new Map<string, string[]>();
  const coordinator = new TransferCoordinator({
    blocks: table,
    cost: new TransferCostModel(resolveTransferConfig("force")),
    idPrefix: "t",
    clock: o.clock,
    beforePhase: o.beforePhase,
    pipelinePhases: () => o.pipelinePhases ?? true,
    log: () => {},
    ...(o.trace ? { trace: o.trace } : {}),
    abortTimeoutMs: 500,
    link: async (rank, m) => {
      const acks = answered.get(m.planId) ?? [];
      answered.set(m.planId, acks);
      sent.push({ rank, type: m.type, planId: m.planId, answeredBefore: [...acks] });
      await Promise.resolve();
      if (o.silent?.(rank, m)) return new Promise(() => {});
      const clock = o.clock ?? realClock;
      const t0 = clock.now();
      const ack = await workers[rank]!.executor.handle(m as TransferPhaseMessage);
      acks.push(`${m.type}@${rank}`);
      return o.stampAcks ? { ...ack, handledMs: clock.now() - t0, receivedAt: clock.timeOrigin + t0 } : ack;
    },
  });
  return {
    workers,
    table,
    coordinator,
    sent,
    report,
    state(rank) {
      const bm = workers[rank]!.bm;
      let pins = 0;
      const published: string[] = [];
      for (let block = 0; block < bm.numBlocks; block++) {
        const i = bm.blockInfo(block);
        pins += i.pinCount;
        // Read without bm.snapshot(): that would start a new report version behind the table's back.
        if (i.hash !== null) {
          published.push(entryKey({ hash: i.hash, block, generation: i.generation, refCount: i.refCount }));
        }
      }
      return {
        free: bm.numFreeBlocks,
        reclaimable: bm.numReclaimableBlocks,
        reserved: bm.numReservedBlocks,
        live: bm.numLiveBlocks,
        pins,
        published: published.sort(),
      };
    },
    tableEntries(rank) {
      return [...(table.table(rank)?.entries.values() ?? [])].map(entryKey).sort();
    },
    async close() {
      await Promise.all(workers.map((w) => w.channel.close()));
    },
  };
}

/** Prefills `tokens` on a worker, writes recognisable K/V into its blocks, and frees it (cached). */
export function cachePrompt(w: TestWorker, tokens: number[], seed: number): BlockHash[] {
  const seq = makeSeq(tokens, BS);
  if (!prefill(w.bm, seq)) throw new Error(`rank ${w.rank} has no room for ${tokens.length} tokens`);
  for (const b of seq.blockTable) {
    const bytes = new Uint8Array(w.kv.blockBytes).map((_, i) => (seed * 31 + b * 7 + i) & 0xff);
    w.kv.scatter(Int32Array.of(b), bytes);
  }
  w.bm.free(seq);
  return prefixBlockHashes(tokens, BS);
}

/** A copy/move candidate of the leading `count` blocks of `hashes`, as the page table has them on `src`. */
export function candidateOf(
  c: TestCluster,
  src: number,
  dst: number,
  hashes: readonly BlockHash[],
  mode: "copy" | "move" = "copy",
  count = hashes.length,
): PlanCandidate {
  const t = c.table.table(src)!;
  const blocks = hashes.slice(0, count).map((h) => {
    const e = t.entries.get(h);
    if (!e) throw new Error(`rank ${src} does not publish ${h}`);
    return { hash: e.hash, parent: e.parent, srcBlock: e.block, generation: e.generation };
  });
  return { kind: "background", mode, src, dst, blocks, savedMs: 1, estimatedMs: 1, estimateSource: "fallback" };
}

/** Tokens 0..n-1 shifted by `from`. */
export function tokens(n: number, from = 0): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}
