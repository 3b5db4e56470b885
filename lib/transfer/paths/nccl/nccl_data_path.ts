/**
 * {@link KvDataPath} of the CUDA backend: one NCCL pair per direct NVLink peer (ffi/kv_transfer.ts
 * NcclPair), the packed payload gathered, sent and scattered on the GPUs (csrc/cuda/
 * nccl_kv_transfer.cu), never through host memory.
 *
 * NCCL matches sends and receives by order, per direction: the control plane sends execute to both
 * sides in the same order per direction, and each side posts its half when execute arrives. A
 * posted half cannot be withdrawn, so a plan cancelled (or timed out) after posting aborts its
 * pair: otherwise the orphaned half would pair up with the next plan's. Later plans with that
 * peer fail at once; onPairBroken tells the worker, whose PerPeerDataPath moves the peer to the
 * host path.
 * @module
 */
import { type PendingTransfer, TransferTimeoutError } from "../direct_data_path.ts";
import type { KvDataPath, KvTransferJob } from "../kv_data_path.ts";

/** The blocks a pair moves (ffi/kv_transfer.ts KvBlocks). */
export interface DeviceKvBlocks {
  readonly handle: bigint;
  readonly numBlocks: number;
  readonly blockBytes: number;
}

/** One peer's pair (ffi/kv_transfer.ts NcclPair has this shape). */
export interface PairLink {
  send(kv: DeviceKvBlocks, ids: Int32Array, segmentBytes?: number): PendingTransfer;
  recv(kv: DeviceKvBlocks, ids: Int32Array, segmentBytes?: number): PendingTransfer;
  abort(): void;
  dispose(): void;
}

/** Options of an {@link NcclDataPath}. */
export interface NcclDataPathOptions {
  /** Bound on one plan's transfer; past it the pair is aborted and the plan fails. */
  timeoutMs: number;
  /** Segment size both sides use (0 or unset: the native default rule). */
  segmentBytes?: number;
  /** Called once when a peer's pair is aborted, so the worker can ask for a new one. */
  onPairBroken?: (peerRank: number, reason: string) => void;
}

/** KvDataPath over per-peer NCCL pairs. */
export class NcclDataPath implements KvDataPath {
  readonly #kv: DeviceKvBlocks;
  readonly #pairs: Map<number, PairLink>;
  readonly #o: NcclDataPathOptions;
  readonly #posted = new Map<string, number>();
  readonly #cancelled = new Map<string, string>();
  readonly #broken = new Map<number, string>();

  /** `pairs`: peer rank -> this worker's end of the pair with that peer (taken over: close() disposes them). */
  constructor(kv: DeviceKvBlocks, pairs: Map<number, PairLink>, options: NcclDataPathOptions) {
    if (!(options.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${options.timeoutMs}`);
    this.#kv = kv;
    this.#pairs = new Map(pairs);
    this.#o = options;
  }

  get blockBytes(): number {
    return this.#kv.blockBytes;
  }

  send(job: KvTransferJob): Promise<number> {
    return this.#run(job, "send", job.srcBlocks);
  }

  receive(job: KvTransferJob): Promise<number> {
    return this.#run(job, "recv", job.dstBlocks);
  }

  cancel(planId: string, reason: string): void {
    this.#cancelled.set(planId, reason);
    // Plans cancelled before this side saw them are remembered for a while only.
    if (this.#cancelled.size > 1024) this.#cancelled.delete(this.#cancelled.keys().next().value!);
    const peer = this.#posted.get(planId);
    if (peer !== undefined) this.#breakPair(peer, `plan ${planId} cancelled after its half was posted: ${reason}`);
  }

  /** Aborts and disposes the pair with `peer` (its partner dropped its end); later plans with that peer fail at once. */
  dropPeer(peer: number, reason: string): void {
    this.#breakPair(peer, reason);
  }

  async close(): Promise<void> {
    for (const [peer, pair] of this.#pairs) {
      this.#pairs.delete(peer);
      pair.dispose();
    }
  }

  async #run(job: KvTransferJob, side: "send" | "recv", ids: Int32Array): Promise<number> {
    // The sender may not know the destination's blocks (pipelined phases); the receiver does.
    if ((side === "recv" || job.dstBlocks.length > 0) && job.srcBlocks.length !== job.dstBlocks.length) {
      throw new RangeError(
        `plan ${job.planId}: ${job.srcBlocks.length} source blocks but ${job.dstBlocks.length} destination blocks`,
      );
    }
    const cancelled = this.#cancelled.get(job.planId);
    if (cancelled !== undefined) throw new Error(`plan ${job.planId} was cancelled: ${cancelled}`);
    const pair = this.#pairs.get(job.peerRank);
    if (!pair) {
      const why = this.#broken.get(job.peerRank) ?? "no NCCL pair with that rank";
      throw new Error(`plan ${job.planId}: cannot ${side} with rank ${job.peerRank}: ${why}`);
    }
    const pending = side === "send"
      ? pair.send(this.#kv, ids, this.#o.segmentBytes)
      : pair.recv(this.#kv, ids, this.#o.segmentBytes);
    this.#posted.set(job.planId, job.peerRank);
    try {
      if (!(await pending.wait(this.#o.timeoutMs))) {
        const reason =
          `plan ${job.planId}: ${side} with rank ${job.peerRank} not complete after ${this.#o.timeoutMs} ms`;
        this.#breakPair(job.peerRank, reason);
        throw new TransferTimeoutError(reason);
      }
      return ids.length * this.#kv.blockBytes;
    } finally {
      this.#posted.delete(job.planId);
      this.#cancelled.delete(job.planId);
      pending.dispose();
    }
  }

  #breakPair(peer: number, reason: string): void {
    const pair = this.#pairs.get(peer);
    if (!pair) return;
    this.#pairs.delete(peer);
    this.#broken.set(peer, `its NCCL pair was aborted (${reason})`);
    pair.abort();
    try {
      pair.dispose();
    } catch (e) {
      // Device work that outlives the abort leaks its staging memory; the pair is gone either way.
      reason += `; disposing it failed: ${e instanceof Error ? e.message : String(e)}`;
    }
    this.#o.onPairBroken?.(peer, reason);
  }
}
