/**
 * Typed facade over the native KV transfer path (lmpool.h "KV transfer between GPUs"): device
 * buffers, packing, validation patterns, same-process peer copies, CUDA IPC views and NCCL pair
 * communicators. Transfers are asynchronous and hand back a {@link TransferJob}; waiting always
 * takes a timeout, so a peer that never posts its half cannot hang a worker.
 *
 * @example
 * ```ts
 * const xfer = new KvTransferEngine(native());
 * using job = xfer.peerCopy(srcKv, [3, 7], dstKv, [0, 1], "copyEngine");
 * if (!(await job.wait(5000))) throw new Error("transfer timed out");
 * ```
 * @module
 */
import type { KvCache, Native } from "./native.ts";
import { NativeHandle } from "./native_handle.ts";

/** lp_status of a bounded wait that ran out (LP_ERR_TIMEOUT). */
const LP_ERR_TIMEOUT = -8;
/** Most blocks one transfer call moves (LP_KV_MAX_TRANSFER_BLOCKS). */
const MAX_TRANSFER_BLOCKS = 2048;

/** Ways a same-process copy moves blocks (LP_PEER_*): see lp_kv_peer_copy. */
const PeerCopyMode = { copyEngine: 0, kernel: 1, copyEngineDirect: 2 } as const;
/** Name of a peer copy mode. */
export type PeerCopyModeName = keyof typeof PeerCopyMode;

/** Something that addresses KV blocks: a local {@link KvCache} or a {@link RemoteKvCache} view. */
export interface KvBlocks {
  readonly handle: bigint;
  readonly numBlocks: number;
  readonly blockBytes: number;
}

/** Block ids as the native calls take them, checked against a cache. */
function blockIds(ids: Int32Array | readonly number[], kv: KvBlocks, what: string): Int32Array {
  const out = ids instanceof Int32Array ? ids : Int32Array.from(ids);
  if (out.length < 1 || out.length > MAX_TRANSFER_BLOCKS) {
    throw new RangeError(`${what}: ${out.length} block ids; a transfer moves 1..${MAX_TRANSFER_BLOCKS}`);
  }
  for (const id of out) {
    if (id < 0 || id >= kv.numBlocks) throw new RangeError(`${what}: block id ${id} outside [0, ${kv.numBlocks})`);
  }
  return out;
}

/** An enqueued transfer. Handle 0 means it was complete when returned (CPU backend, sync calls). */
export class TransferJob extends NativeHandle {
  constructor(
    readonly native: Native,
    handle: bigint,
  ) {
    super(handle, "TransferJob");
  }

  /** Whether the transfer has completed; throws if it failed (e.g. its NCCL pair was aborted). */
  done(): boolean {
    const out = new Int32Array(1);
    this.native.check(this.native.symbols.lp_xfer_query(this.handle, out), "lp_xfer_query");
    return out[0] === 1;
  }

  /** Blocks up to timeoutMs; true when complete, false on timeout (the job stays pending). */
  waitSync(timeoutMs: number): boolean {
    if (!(timeoutMs >= 0)) throw new RangeError(`timeoutMs must be >= 0, got ${timeoutMs}`);
    const status = Number(this.native.symbols.lp_xfer_wait(this.handle, Math.min(Math.floor(timeoutMs), 2 ** 31 - 1)));
    if (status === LP_ERR_TIMEOUT) return false;
    this.native.check(status, "lp_xfer_wait");
    return true;
  }

  /**
   * Waits up to timeoutMs without holding the event loop for long: it blocks in slices of sliceMs
   * (a spin in native code, so a short transfer is seen within microseconds) and yields between.
   */
  async wait(timeoutMs: number, sliceMs = 1): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const left = deadline - performance.now();
      if (this.waitSync(Math.max(0, Math.min(sliceMs, left)))) return true;
      if (left <= sliceMs) return false;
      await new Promise<void>((resolve) => setTimeout(resolve, 0));
    }
  }

  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_xfer_release(handle), "lp_xfer_release");
  }
}

/** Runs a call that hands back a job handle through `out`; a non-zero status throws, naming `name`. */
function startJob(native: Native, call: (out: BigUint64Array) => number | bigint, name: string): TransferJob {
  const out = new BigUint64Array(1);
  native.check(call(out), name);
  return new TransferJob(native, out[0]!);
}

/** A device allocation for packed payloads (host memory on the CPU backend). */
export class DeviceBuffer extends NativeHandle {
  /** Its size as the library recorded it (lp_dev_buffer_bytes). */
  readonly bytes: number;

  constructor(
    readonly native: Native,
    handle: bigint,
    readonly device: number,
  ) {
    super(handle, "DeviceBuffer");
    const out = new BigInt64Array(1);
    native.check(native.symbols.lp_dev_buffer_bytes(handle, out), "lp_dev_buffer_bytes");
    this.bytes = Number(out[0]);
  }

  /** Copies host bytes in at `offset` (complete on return). */
  write(offset: number, data: Uint8Array): void {
    this.native.check(
      this.native.symbols.lp_dev_buffer_write(this.handle, offset, data, data.length),
      "lp_dev_buffer_write",
    );
  }

  /** Copies `length` bytes out from `offset` (complete on return). */
  read(offset: number, length: number): Uint8Array {
    const out = new Uint8Array(length);
    this.native.check(this.native.symbols.lp_dev_buffer_read(this.handle, offset, out, length), "lp_dev_buffer_read");
    return out;
  }

  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_dev_buffer_free(handle), "lp_dev_buffer_free");
  }
}

/** Another process's KV cache mapped through CUDA IPC; usable wherever a transfer takes a cache. */
class RemoteKvCache extends NativeHandle implements KvBlocks {
  constructor(
    readonly native: Native,
    handle: bigint,
    readonly numBlocks: number,
    readonly blockBytes: number,
  ) {
    super(handle, "RemoteKvCache");
  }

  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_kv_ipc_close(handle), "lp_kv_ipc_close");
  }
}

/** Options of an NCCL pair. */
export interface PairOptions {
  /** Pins NCCL's CTA/channel count (0: NCCL's choice and its NCCL_MIN/MAX_NCHANNELS env). */
  nchannels?: number;
  /** Bytes of each of the 4 staging slots per direction (0: 32 MiB). Both ranks must agree. */
  slotBytes?: number;
  /** Bound on start-up (peer joining, warm-up) and on finalize at dispose. */
  timeoutMs: number;
}

/** Releases an NCCL pair: finalize (bounded), or nothing more after abort. */
abstract class PairHandle extends NativeHandle {
  constructor(
    readonly native: Native,
    handle: bigint,
    kind: string,
  ) {
    super(handle, kind);
  }

  /** Stops the pair's device work (pending jobs fail); call after a wait timed out. */
  abort(): void {
    this.native.check(this.native.symbols.lp_nccl_pair_abort(this.handle), "lp_nccl_pair_abort");
  }
  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_nccl_pair_destroy(handle), "lp_nccl_pair_destroy");
  }
  protected job(call: (out: BigUint64Array) => number | bigint, name: string): TransferJob {
    return startJob(this.native, call, name);
  }
}

/** This process's rank of a direct NVLink pair (one NCCL communicator per direction). */
export class NcclPair extends PairHandle {
  constructor(
    native: Native,
    handle: bigint,
    readonly rank: number,
    readonly device: number,
  ) {
    super(native, handle, "NcclPair");
  }

  /** The other rank. */
  get peer(): number {
    return 1 - this.rank;
  }

  /** Sends blocks `ids` of `kv` (packed) to the peer; the peer must post the matching recv. */
  send(kv: KvBlocks, ids: Int32Array | readonly number[], segmentBytes = 0): TransferJob {
    const b = blockIds(ids, kv, "send");
    return this.job(
      (out) => this.native.symbols.lp_kv_send(this.handle, kv.handle, b, b.length, this.peer, segmentBytes, out),
      `lp_kv_send(n=${b.length})`,
    );
  }

  /** Receives the peer's matching send into blocks `ids` of `kv`. */
  recv(kv: KvBlocks, ids: Int32Array | readonly number[], segmentBytes = 0): TransferJob {
    const b = blockIds(ids, kv, "recv");
    return this.job(
      (out) => this.native.symbols.lp_kv_recv(this.handle, kv.handle, b, b.length, this.peer, segmentBytes, out),
      `lp_kv_recv(n=${b.length})`,
    );
  }
}

/** Both ranks of a pair in this process (device0 is rank 0): benchmarks and tests. */
export class LocalNcclPair extends PairHandle {
  constructor(
    native: Native,
    handle: bigint,
    readonly devices: readonly [number, number],
  ) {
    super(native, handle, "LocalNcclPair");
  }

  /** Full packed path: pack on srcRank's device, ncclSend/Recv per segment, unpack. */
  transfer(
    srcRank: 0 | 1,
    src: KvBlocks,
    srcIds: Int32Array | readonly number[],
    dst: KvBlocks,
    dstIds: Int32Array | readonly number[],
    segmentBytes = 0,
  ): TransferJob {
    const s = blockIds(srcIds, src, "source"), d = blockIds(dstIds, dst, "destination");
    if (s.length !== d.length) throw new RangeError(`${s.length} source ids but ${d.length} destination ids`);
    return this.job(
      (out) =>
        this.native.symbols.lp_kv_transfer_local(
          this.handle,
          srcRank,
          src.handle,
          s,
          dst.handle,
          d,
          s.length,
          segmentBytes,
          out,
        ),
      `lp_kv_transfer_local(n=${s.length})`,
    );
  }

  /** Raw link baseline: one plain ncclSend/ncclRecv of `bytes` between two buffers. */
  sendRecvRaw(srcRank: 0 | 1, src: DeviceBuffer, dst: DeviceBuffer, bytes: number): TransferJob {
    return this.job(
      (out) => this.native.symbols.lp_nccl_local_sendrecv(this.handle, srcRank, src.handle, dst.handle, bytes, out),
      `lp_nccl_local_sendrecv(${bytes})`,
    );
  }
}

/** Entry point of the transfer facade, bound to one opened native library. */
export class KvTransferEngine {
  constructor(readonly native: Native) {}

  /** Allocates a device buffer. */
  allocBuffer(device: number, bytes: number): DeviceBuffer {
    const out = new BigUint64Array(1);
    this.native.check(
      this.native.symbols.lp_dev_buffer_alloc(device, bytes, out),
      `lp_dev_buffer_alloc(device=${device}, ${bytes} bytes)`,
    );
    return new DeviceBuffer(this.native, out[0]!, device);
  }

  /** Raw copy-engine baseline: cudaMemcpyPeerAsync of `bytes` from src to dst. */
  copyBuffer(dst: DeviceBuffer, src: DeviceBuffer, bytes: number): TransferJob {
    return this.#job(
      (out) => this.native.symbols.lp_dev_buffer_copy(dst.handle, src.handle, bytes, out),
      `lp_dev_buffer_copy(${bytes})`,
    );
  }

  /** Packs blocks `ids` of kv into buf ([L, 2, n, block_size, kv_heads, head_dim]). */
  pack(kv: KvBlocks, ids: Int32Array | readonly number[], buf: DeviceBuffer): TransferJob {
    const b = blockIds(ids, kv, "pack");
    this.#checkRoom(buf, b.length * kv.blockBytes);
    return this.#job(
      (out) => this.native.symbols.lp_kv_pack(kv.handle, b, b.length, buf.handle, out),
      `lp_kv_pack(n=${b.length})`,
    );
  }

  /** Unpacks buf (as made by pack) into blocks `ids` of kv. */
  unpack(kv: KvBlocks, ids: Int32Array | readonly number[], buf: DeviceBuffer): TransferJob {
    const b = blockIds(ids, kv, "unpack");
    this.#checkRoom(buf, b.length * kv.blockBytes);
    return this.#job(
      (out) => this.native.symbols.lp_kv_unpack(kv.handle, b, b.length, buf.handle, out),
      `lp_kv_unpack(n=${b.length})`,
    );
  }

  /** Bytes per segment a transfer of n blocks uses (segmentBytes 0: the default rule). */
  segmentBytes(kv: KvBlocks, n: number, segmentBytes = 0): number {
    const out = new BigInt64Array(1);
    this.native.check(this.native.symbols.lp_kv_segment_bytes(kv.handle, n, segmentBytes, out), "lp_kv_segment_bytes");
    return Number(out[0]);
  }

  /** Fills blocks `ids` with the validation pattern of `seed` (complete on return). */
  fillPattern(kv: KvBlocks, ids: Int32Array | readonly number[], seed: bigint): void {
    const b = blockIds(ids, kv, "fillPattern");
    this.native.check(
      this.native.symbols.lp_kv_fill_pattern(kv.handle, b, b.length, BigInt.asUintN(64, seed)),
      "lp_kv_fill_pattern",
    );
  }

  /** 4-byte words of blocks `ids` that differ from the pattern of `seed` (0: byte-exact). */
  countPatternMismatches(kv: KvBlocks, ids: Int32Array | readonly number[], seed: bigint): number {
    const b = blockIds(ids, kv, "countPatternMismatches");
    const out = new BigInt64Array(1);
    this.native.check(
      this.native.symbols.lp_kv_check_pattern(kv.handle, b, b.length, BigInt.asUintN(64, seed), out),
      "lp_kv_check_pattern",
    );
    return Number(out[0]);
  }

  /** Same-process copy of blocks srcIds of src into dstIds of dst (another device, or an IPC view). */
  peerCopy(
    src: KvBlocks,
    srcIds: Int32Array | readonly number[],
    dst: KvBlocks,
    dstIds: Int32Array | readonly number[],
    mode: PeerCopyModeName,
    segmentBytes = 0,
  ): TransferJob {
    const s = blockIds(srcIds, src, "source"), d = blockIds(dstIds, dst, "destination");
    if (s.length !== d.length) throw new RangeError(`${s.length} source ids but ${d.length} destination ids`);
    if (!(mode in PeerCopyMode)) throw new RangeError(`unknown peer copy mode ${JSON.stringify(mode)}`);
    return this.#job(
      (out) =>
        this.native.symbols.lp_kv_peer_copy(
          src.handle,
          dst.handle,
          s,
          d,
          s.length,
          PeerCopyMode[mode],
          segmentBytes,
          out,
        ),
      `lp_kv_peer_copy(${mode}, n=${s.length})`,
    );
  }

  /** The 64-byte CUDA IPC handle of a cache's tensor, for a peer worker's openRemoteKv. */
  exportKv(kv: KvCache): Uint8Array {
    const out = new Uint8Array(64);
    this.native.check(this.native.symbols.lp_kv_ipc_handle(kv.handle, out), "lp_kv_ipc_handle");
    return out;
  }

  /** Maps a peer's exported cache (same model and block size as `like`, numBlocks blocks). */
  openRemoteKv(handle: Uint8Array, like: KvCache, numBlocks: number): RemoteKvCache {
    if (handle.length !== 64) throw new RangeError(`a CUDA IPC handle has 64 bytes, got ${handle.length}`);
    const out = new BigUint64Array(1);
    this.native.check(this.native.symbols.lp_kv_ipc_open(handle, like.handle, numBlocks, out), "lp_kv_ipc_open");
    return new RemoteKvCache(this.native, out[0]!, numBlocks, like.blockBytes);
  }

  /** NCCL_VERSION_CODE of the loaded NCCL, or the reason NCCL cannot be used here. */
  ncclVersion(): { version: number } | { unavailable: string } {
    const out = new Int32Array(1);
    const status = Number(this.native.symbols.lp_nccl_version(out));
    return status === 0 ? { version: out[0]! } : { unavailable: this.native.lastError() };
  }

  /** A fresh 128-byte NCCL unique id (rank 0 makes it; the control plane relays it). */
  ncclUniqueId(): Uint8Array {
    const out = new Uint8Array(128);
    this.native.check(this.native.symbols.lp_nccl_unique_id(out), "lp_nccl_unique_id");
    return out;
  }

  /** Joins a cross-process pair as `rank` on `device`; both ranks call it with the same id. */
  createPair(uniqueId: Uint8Array, rank: 0 | 1, device: number, o: PairOptions): NcclPair {
    if (uniqueId.length !== 128) throw new RangeError(`an NCCL unique id has 128 bytes, got ${uniqueId.length}`);
    const out = new BigUint64Array(1);
    this.native.check(
      this.native.symbols.lp_nccl_pair_create(
        uniqueId,
        2,
        rank,
        device,
        o.nchannels ?? 0,
        o.slotBytes ?? 0,
        o.timeoutMs,
        out,
      ),
      `lp_nccl_pair_create(rank=${rank}, device=${device})`,
    );
    return new NcclPair(this.native, out[0]!, rank, device);
  }

  /** Both ranks of a pair in this process (device0 = rank 0). */
  createLocalPair(device0: number, device1: number, o: PairOptions): LocalNcclPair {
    const out = new BigUint64Array(1);
    this.native.check(
      this.native.symbols.lp_nccl_pair_create_local(
        device0,
        device1,
        o.nchannels ?? 0,
        o.slotBytes ?? 0,
        o.timeoutMs,
        out,
      ),
      `lp_nccl_pair_create_local(${device0}, ${device1})`,
    );
    return new LocalNcclPair(this.native, out[0]!, [device0, device1]);
  }

  #checkRoom(buf: DeviceBuffer, bytes: number): void {
    if (bytes > buf.bytes) throw new RangeError(`${bytes} packed bytes do not fit the ${buf.bytes}-byte buffer`);
  }

  #job(call: (out: BigUint64Array) => number | bigint, name: string): TransferJob {
    return startJob(this.native, call, name);
  }
}
