/**
 * Typed facade over the native library: the rest of LMPool calls these methods and never sees raw
 * symbols. Every non-zero status becomes a NativeError carrying lp_last_error()'s message.
 * @module
 */
import { NativeError } from "../lib/core/errors.ts";
import type { OpenedLibrary } from "./dlopen.ts";
import { type BackendKind, loadLibrary } from "./loader.ts";
import { NativeHandle } from "./native_handle.ts";
import type { SymbolName } from "./symbols.ts";
import { encodeModelConfig, type NativeModelConfig } from "./model_config.ts";
import { type StepBatch, StepBatchPacker } from "./step_batch.ts";

export type { NativeModelConfig } from "./model_config.ts";
export { allocateStepBatch, type StepBatch, type StepBatchCapacity } from "./step_batch.ts";
export { type RowControls, StepControlsWriter } from "./step_controls.ts";

/** The NUL-terminated text a C call writes into a 4096-byte buffer (truncated there). */
function readText(write: (buf: Uint8Array) => unknown): string {
  const buf = new Uint8Array(4096);
  write(buf);
  const end = buf.indexOf(0);
  return new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end));
}

/** Element types of weights handed to the library. */
const DType = { bf16: 0, f16: 1, f32: 2 } as const;
export type DTypeName = keyof typeof DType;

/** Weight kinds of lmpool.h (LP_W_*). */
const WeightKind = {
  embed: 0,
  finalNorm: 1,
  lmHead: 2,
  inputNorm: 10,
  q: 11,
  k: 12,
  v: 13,
  o: 14,
  qNorm: 15,
  kNorm: 16,
  postNorm: 17,
  gate: 18,
  up: 19,
  down: 20,
} as const;
export type WeightKindName = keyof typeof WeightKind;

/** The opened native library. */
export class Native {
  readonly backend: BackendKind;
  readonly path: string;
  readonly #lib: OpenedLibrary<SymbolName>;

  constructor(options: { backend?: BackendKind; path?: string } = {}) {
    const loaded = loadLibrary(options);
    this.backend = loaded.backend;
    this.path = loaded.path;
    this.#lib = loaded.lib;
  }

  /** Raw symbols, for modules inside ffi/ only. */
  get symbols(): OpenedLibrary<SymbolName>["symbols"] {
    return this.#lib.symbols;
  }

  /** The last error message recorded by the library on this thread. */
  lastError(): string {
    return readText((buf) => this.#lib.symbols.lp_last_error(buf, buf.length));
  }

  /** Throws a NativeError for a non-zero status, naming the call. */
  check(status: number | bigint, call: string): void {
    if (Number(status) !== 0) throw new NativeError(`${call} failed: ${this.lastError()}`, Number(status));
  }

  abiVersion(): number {
    return Number(this.#lib.symbols.lp_abi_version());
  }

  /** lp_step_batch as this build laid it out: "size=S name@offset ..." (see ffi/step_batch.ts). */
  stepBatchLayout(): string {
    return readText((buf) => this.#lib.symbols.lp_step_batch_layout(buf, buf.length));
  }

  deviceCount(): number {
    const out = new Int32Array(1);
    this.check(this.#lib.symbols.lp_device_count(out), "lp_device_count");
    return out[0] ?? 0;
  }

  setDevice(device: number): void {
    this.check(this.#lib.symbols.lp_set_device(device), `lp_set_device(${device})`);
  }

  /** Free and total memory of the current device, in bytes. */
  deviceMemory(): { free: number; total: number } {
    const out = new BigInt64Array(2);
    this.check(this.#lib.symbols.lp_device_memory(out), "lp_device_memory");
    return { free: Number(out[0]), total: Number(out[1]) };
  }

  synchronize(): void {
    this.check(this.#lib.symbols.lp_device_synchronize(), "lp_device_synchronize");
  }

  /** RMSNorm over `rows` rows of `dim` bf16 values (bit patterns in Uint16Array). */
  rmsnormBf16(x: Uint16Array, w: Uint16Array, rows: number, dim: number, eps: number): Uint16Array {
    if (x.length !== rows * dim) throw new RangeError(`x has ${x.length} values, expected rows*dim=${rows * dim}`);
    if (w.length !== dim) throw new RangeError(`w has ${w.length} values, expected dim=${dim}`);
    const out = new Uint16Array(rows * dim);
    this.check(this.#lib.symbols.lp_rmsnorm_bf16(x, w, out, rows, dim, eps), "lp_rmsnorm_bf16");
    return out;
  }

  /** Device copy bandwidth in bytes/s (read + write) over `iters` copies of `bytes`. */
  benchCopyBandwidth(bytes: number, iters: number): number {
    const out = new Float64Array(1);
    this.check(this.#lib.symbols.lp_bench_copy_bandwidth(bytes, iters, out), `lp_bench_copy_bandwidth(${bytes})`);
    return out[0]!;
  }

  /** bf16 GEMM rate in FLOP/s of an m x n x k product, over `iters` runs. */
  benchGemmBf16(m: number, n: number, k: number, iters: number): number {
    const out = new Float32Array(1);
    this.check(this.#lib.symbols.lp_bench_gemm_bf16(m, n, k, iters, out), `lp_bench_gemm_bf16(${m}x${n}x${k})`);
    return out[0]!;
  }

  /** Creates an empty model (weights to be set, then finalize()). */
  createModel(config: NativeModelConfig): NativeModel {
    const out = new BigUint64Array(1);
    this.check(this.#lib.symbols.lp_model_create(encodeModelConfig(config), out), "lp_model_create");
    return new NativeModel(this, out[0]!, config);
  }

  close(): void {
    this.#lib.close();
  }
}

/** A model on the current device. */
export class NativeModel extends NativeHandle {
  /** lp_step_collect's out_done. */
  readonly #done = new Int32Array(1);
  /** The lp_step_batch of this model's steps (one at a time). */
  readonly #batch: StepBatchPacker;

  constructor(
    readonly native: Native,
    handle: bigint,
    readonly config: NativeModelConfig,
  ) {
    super(handle, "NativeModel");
    this.#batch = new StepBatchPacker(config.vocabSize);
  }

  /** Hands one weight over; `data` holds `numel` elements of `dtype`. */
  setWeight(layer: number, kind: WeightKindName, dtype: DTypeName, data: ArrayBufferView, numel: number): void {
    this.native.check(
      this.native.symbols.lp_model_set_weight(this.handle, layer, WeightKind[kind], DType[dtype], data, numel),
      `lp_model_set_weight(layer=${layer}, kind=${kind})`,
    );
  }

  /** Checks completeness and sizes workspaces for the largest step. */
  finalize(maxNumTokens: number, maxNumSeqs: number): void {
    this.native.check(
      this.native.symbols.lp_model_finalize(this.handle, maxNumTokens, maxNumSeqs),
      "lp_model_finalize",
    );
  }

  /** Execution time of the last step that ran tokens, ms (device time on CUDA, compute time on the CPU). */
  lastStepMs(): number {
    const out = new Float64Array(1);
    this.native.check(this.native.symbols.lp_model_last_step_ms(this.handle, out), "lp_model_last_step_ms");
    return out[0]!;
  }

  /**
   * Of the last step launched with `deferSampling`, ms the device stood idle between the forward
   * pass's end and {@link stepLaunchSampling}'s enqueue (lp_model_last_sampling_wait_ms in lmpool.h).
   */
  lastSamplingWaitMs(): number {
    const out = new Float64Array(1);
    this.native.check(
      this.native.symbols.lp_model_last_sampling_wait_ms(this.handle, out),
      "lp_model_last_sampling_wait_ms",
    );
    return out[0]!;
  }

  weightBytes(): number {
    const out = new BigInt64Array(1);
    this.native.check(this.native.symbols.lp_model_weight_bytes(this.handle, out), "lp_model_weight_bytes");
    return Number(out[0]);
  }

  /** Allocates a paged KV cache for this model. */
  createKvCache(numBlocks: number, blockSize: number): KvCache {
    const out = new BigUint64Array(1);
    this.native.check(
      this.native.symbols.lp_kv_create(this.handle, numBlocks, blockSize, out),
      `lp_kv_create(num_blocks=${numBlocks}, block_size=${blockSize})`,
    );
    return new KvCache(this, out[0]!, numBlocks, blockSize);
  }

  /** Runs one forward step (all layers) and samples one token per row. */
  step(kv: KvCache, b: StepBatch): void {
    this.#call("lp_step", kv, b);
  }

  /**
   * Enqueues one step and returns (the CPU backend computes it here); {@link stepCollect} ends it.
   * `b`'s output arrays are written at the collect, so they must stay alive until then.
   */
  stepLaunch(kv: KvCache, b: StepBatch): void {
    this.#call("lp_step_launch", kv, b);
  }

  /**
   * The sampling of a step launched with `b.deferSampling = 1` (which ran the forward pass only):
   * `b` is the launched batch with its sampling controls now filled in. {@link stepCollect} ends it.
   */
  stepLaunchSampling(b: StepBatch): void {
    const batch = this.#batch.pack(b);
    this.native.check(
      this.native.symbols.lp_step_launch_sampling(this.handle, batch),
      `lp_step_launch_sampling(num_rows=${b.numRows})`,
    );
  }

  /** Whether stepLaunch returns before the step is computed (CUDA), leaving the caller's thread free. */
  get launchesAsync(): boolean {
    return this.native.backend === "cuda";
  }

  /** Whether the launched step ended (its outputs are then filled); `wait` blocks until it has. */
  stepCollect(wait: boolean): boolean {
    const done = this.#done;
    this.native.check(this.native.symbols.lp_step_collect(this.handle, wait ? 1 : 0, done), "lp_step_collect");
    return done[0] === 1;
  }

  #call(name: "lp_step" | "lp_step_launch", kv: KvCache, b: StepBatch): void {
    const batch = this.#batch.pack(b);
    this.native.check(
      this.native.symbols[name](this.handle, kv.handle, batch),
      `${name}(num_seqs=${b.numSeqs}, num_tokens=${b.numTokens})`,
    );
  }

  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_model_destroy(handle), "lp_model_destroy");
  }
}

/** A paged KV cache [L, 2, numBlocks, blockSize, kvHeads, headDim]. */
export class KvCache extends NativeHandle {
  readonly blockBytes: number;
  readonly native: Native;

  constructor(
    readonly model: NativeModel,
    handle: bigint,
    readonly numBlocks: number,
    readonly blockSize: number,
  ) {
    super(handle, "KvCache");
    this.native = model.native;
    const out = new BigInt64Array(1);
    model.native.check(model.native.symbols.lp_kv_block_bytes(handle, out), "lp_kv_block_bytes");
    this.blockBytes = Number(out[0]);
  }

  /** Packs the given blocks (all layers, K and V) into one host buffer. */
  gather(blockIds: Int32Array): Uint8Array {
    const out = new Uint8Array(blockIds.length * this.blockBytes);
    this.model.native.check(
      this.model.native.symbols.lp_kv_gather_host(this.handle, blockIds, blockIds.length, out),
      `lp_kv_gather_host(n=${blockIds.length})`,
    );
    return out;
  }

  /** Unpacks a buffer made by gather() into the given blocks. */
  scatter(blockIds: Int32Array, packed: Uint8Array): void {
    if (packed.length !== blockIds.length * this.blockBytes) {
      throw new RangeError(`packed buffer has ${packed.length} bytes, expected ${blockIds.length * this.blockBytes}`);
    }
    this.model.native.check(
      this.model.native.symbols.lp_kv_scatter_host(this.handle, blockIds, blockIds.length, packed),
      `lp_kv_scatter_host(n=${blockIds.length})`,
    );
  }

  protected release(handle: bigint): void {
    this.native.check(this.native.symbols.lp_kv_destroy(handle), "lp_kv_destroy");
  }
}

// One library per backend for the process: closing a library whose OpenMP threads or FFI
// trampolines are still around crashes the runtime, and reopening gains nothing.
const opened = new Map<BackendKind | "auto", Native>();

/**
 * The process's native library for `backend` (undefined: the loader's choice, see ffi/loader.ts),
 * opened on first use; every caller that asks with the same `backend` gets the same one. Only this
 * cache opens libraries for LMPool itself; `new Native()` is for tests and benchmarks that want one
 * of their own.
 */
export function native(backend?: BackendKind): Native {
  const key = backend ?? "auto";
  let n = opened.get(key);
  if (!n) {
    n = new Native({ backend });
    opened.set(key, n);
  }
  return n;
}
