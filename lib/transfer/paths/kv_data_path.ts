/**
 * The worker-to-worker K/V data path of a transfer plan's execute phase, behind one interface:
 * the source gathers the plan's blocks (all layers, K and V) into one packed
 * [L, 2, B, block_size, kv_heads, head_dim] payload and sends it once; the destination receives it
 * and scatters it into its reserved blocks. KV payloads never pass through the launcher or the
 * control plane.
 *
 * Implementations:
 * - HostCopyDataPath (host/host_copy_data_path.ts): gather to host memory, move the bytes over the
 *   workers' own Unix sockets (host/kv_peer_channel.ts), scatter on the other side. The CPU
 *   backend's path; it also works on CUDA (through host memory), as a fallback.
 * - IpcDataPath (ipc/ipc_data_path.ts): the CUDA backend's fastest path: the source copies its
 *   blocks straight into the partner's reserved blocks through a CUDA IPC mapping of its cache
 *   (copy engine, no packing) and tells the destination when they landed. Between two ranks of
 *   one device the same code is the device-local path, a device-to-device copy.
 * - NcclDataPath (nccl/nccl_data_path.ts): the CUDA backend's path over the NCCL pair of a
 *   direct NVLink partner, packing, sending and unpacking on the GPUs.
 * - PerPeerDataPath (../worker/per_peer_data_path.ts): what a worker runs (worker_data_path.ts
 *   opens it): the device-local copy, CUDA IPC or NCCL for partners whose direct path came up,
 *   host copies for every other peer and after a direct path breaks.
 * @module
 */

/** Packs and unpacks blocks of a KV cache (ffi/native.ts KvCache has this shape). */
export interface PackedKvStore {
  /** Bytes of one block across all layers, K and V. */
  readonly blockBytes: number;
  gather(blockIds: Int32Array): Uint8Array;
  scatter(blockIds: Int32Array, packed: Uint8Array): void;
}

/** One plan's execute phase as a data path sees it (both sides get both id lists). */
export interface KvTransferJob {
  planId: string;
  /** The other worker of the plan. */
  peerRank: number;
  /** Source block ids on the source rank, in plan order. */
  srcBlocks: Int32Array;
  /**
   * Reserved block ids on the destination rank, in the same order. A source's job may leave them
   * empty when its execute came before the destination's prepare answer (pipelined phases): only
   * a one-sided path needs them there, and it learns them from the destination.
   */
  dstBlocks: Int32Array;
}

/**
 * Moves one plan's packed K/V between two workers. The control plane sends execute to both sides
 * at once and in the same order per direction, and waits for both acks before publish. Whatever
 * the path, `receive` resolves only once the bytes are in the destination's blocks (a one-sided
 * CUDA IPC copy: when the source reports it complete).
 */
export interface KvDataPath {
  /** Bytes of one block (for the payload size and the cost model). */
  readonly blockBytes: number;
  /**
   * The path plans with `peerRank` take: "host" (the bytes move through this worker's event loop
   * and sockets) or a direct path's name. Absent: "host".
   */
  pathOf?(peerRank: number): string;
  /**
   * True when a destination may start receive() for plans with `peerRank` as soon as it reserved
   * the plan's blocks (at prepare), before its execute: a one-sided path whose source copies only
   * after the destination's go-ahead and only within its own execute, so the go-ahead travels
   * while execute is on its way instead of after it. Absent: false.
   */
  receivesAtPrepare?(peerRank: number): boolean;
  /** Source side: sends `job.srcBlocks` to `job.peerRank` once. Resolves with the bytes sent. */
  send(job: KvTransferJob): Promise<number>;
  /**
   * Destination side: receives the job's payload and writes it into `job.dstBlocks` (reserved
   * blocks). Resolves with the bytes received; rejects after {@link cancel}, writing nothing more.
   */
  receive(job: KvTransferJob): Promise<number>;
  /** Abandons `planId`: a pending receive rejects without writing any block; a late payload is dropped. */
  cancel(planId: string, reason: string): void;
  /** Releases sockets/communicators. Idempotent. */
  close(): Promise<void>;
}

/** A payload whose size does not match the plan. */
export class TransferPayloadError extends Error {
  override readonly name = "TransferPayloadError";
}
