/**
 * What `bun bench transfer` runs on: two devices of one process, a KV cache of the benchmark
 * shape on each (blocks listed in a seeded random order, so transfers gather scattered blocks),
 * one contiguous buffer per device for the raw-link baselines and pack timing, and a local NCCL
 * pair. It starts any measured path in either direction and validates it byte for byte.
 * @module
 */
import { type DeviceBuffer, KvTransferEngine, type LocalNcclPair, type TransferJob } from "../ffi/kv_transfer.ts";
import type { KvCache, Native, NativeModel, NativeModelConfig } from "../ffi/native.ts";
import type { TransferPathName } from "./transfer_profile.ts";

/** Shape and knobs of one rig. */
export interface RigOptions {
  devices: readonly [number, number];
  config: NativeModelConfig;
  blockSize: number;
  maxBlocks: number;
  segmentBytes: number;
  ncclChannels: number;
  timeoutMs: number;
  /** Open the NCCL pair (full runs); the quick CPU run measures pack/unpack only. */
  nccl: boolean;
  seed: number;
}

/** A side of the pair: index into devices. */
export type Side = 0 | 1;

/** Seeded permutation of [0, n). */
function permutation(n: number, seed: number): Int32Array {
  const out = Int32Array.from({ length: n }, (_, i) => i);
  let s = seed >>> 0;
  for (let i = n - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Devices, caches, buffers and pair of the transfer benchmark. */
export class TransferRig {
  readonly xfer: KvTransferEngine;
  readonly models: NativeModel[] = [];
  readonly kv: KvCache[] = [];
  readonly buffers: DeviceBuffer[] = [];
  readonly order: Int32Array[] = [];
  pair: LocalNcclPair | null = null;
  /** Why the NCCL paths are missing, when they are. */
  ncclUnavailable: string | null = null;

  constructor(
    readonly native: Native,
    readonly o: RigOptions,
  ) {
    this.xfer = new KvTransferEngine(native);
    for (const [side, device] of o.devices.entries()) {
      native.setDevice(device);
      const model = native.createModel(o.config);
      this.models.push(model);
      // Spare blocks beyond maxBlocks keep the listed blocks a scattered subset.
      const numBlocks = o.maxBlocks + Math.max(8, o.maxBlocks >> 3);
      const kv = model.createKvCache(numBlocks, o.blockSize);
      this.kv.push(kv);
      this.buffers.push(this.xfer.allocBuffer(device, o.maxBlocks * kv.blockBytes));
      this.order.push(permutation(numBlocks, o.seed + 7919 * side));
    }
    if (o.nccl) {
      const v = this.xfer.ncclVersion();
      if ("unavailable" in v) this.ncclUnavailable = v.unavailable;
      else {this.pair = this.xfer.createLocalPair(o.devices[0], o.devices[1], {
          nchannels: o.ncclChannels,
          timeoutMs: o.timeoutMs,
        });}
    }
  }

  /** KV bytes of one block. */
  get blockBytes(): number {
    return this.kv[0]!.blockBytes;
  }

  /** The first n blocks of a side's scattered order. */
  ids(side: Side, n: number): Int32Array {
    return this.order[side]!.subarray(0, n);
  }

  /** Paths this rig can run. */
  paths(): TransferPathName[] {
    const nccl: TransferPathName[] = this.pair ? ["raw_nccl", "nccl"] : [];
    return ["raw_copy_engine", ...nccl, "copy_engine", "kernel", "copy_engine_direct"];
  }

  /** Starts an n-block transfer of `path` from side src to the other side. */
  start(path: TransferPathName, src: Side, n: number): TransferJob {
    const dst = (1 - src) as Side;
    const s = this.kv[src]!, d = this.kv[dst]!, si = this.ids(src, n), di = this.ids(dst, n);
    const bytes = n * this.blockBytes, seg = this.o.segmentBytes;
    switch (path) {
      case "raw_copy_engine":
        return this.xfer.copyBuffer(this.buffers[dst]!, this.buffers[src]!, bytes);
      case "raw_nccl":
        return this.#pair().sendRecvRaw(src, this.buffers[src]!, this.buffers[dst]!, bytes);
      case "nccl":
        return this.#pair().transfer(src, s, si, d, di, seg);
      case "copy_engine":
        return this.xfer.peerCopy(s, si, d, di, "copyEngine", seg);
      case "kernel":
        return this.xfer.peerCopy(s, si, d, di, "kernel", seg);
      case "copy_engine_direct":
        return this.xfer.peerCopy(s, si, d, di, "copyEngineDirect", seg);
    }
  }

  /** Packs n blocks of a side into its buffer (gather kernel alone). */
  startPack(side: Side, n: number): TransferJob {
    return this.xfer.pack(this.kv[side]!, this.ids(side, n), this.buffers[side]!);
  }

  /** Unpacks n blocks of a side from its buffer (scatter kernel alone). */
  startUnpack(side: Side, n: number): TransferJob {
    return this.xfer.unpack(this.kv[side]!, this.ids(side, n), this.buffers[side]!);
  }

  /** Runs one full-path transfer on freshly patterned source blocks; returns mismatched words at the destination. */
  validate(path: TransferPathName, src: Side, n: number, seed: bigint): number {
    const dst = (1 - src) as Side;
    this.xfer.fillPattern(this.kv[src]!, this.ids(src, n), seed);
    using job = this.start(path, src, n);
    if (!job.waitSync(this.o.timeoutMs)) {
      throw new Error(`${path} ${src} -> ${dst}, ${n} blocks: not complete after ${this.o.timeoutMs} ms`);
    }
    return this.xfer.countPatternMismatches(this.kv[dst]!, this.ids(dst, n), seed);
  }

  #pair(): LocalNcclPair {
    if (!this.pair) throw new Error(`NCCL paths unavailable: ${this.ncclUnavailable ?? "no pair"}`);
    return this.pair;
  }

  /** Frees everything (pair first: its finalize waits for its work). */
  dispose(): void {
    this.pair?.dispose();
    for (const b of this.buffers) b.dispose();
    for (const kv of this.kv) kv.dispose();
    for (const m of this.models) m.dispose();
  }
}
