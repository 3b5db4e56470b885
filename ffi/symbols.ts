/**
 * The one symbol table of the C ABI (csrc/include/lmpool.h), in a runtime-neutral form that
 * ffi/dlopen.ts turns into bun:ffi or Deno.dlopen declarations.
 * @module
 */

/**
 * Argument/return kinds: integers and floats by value, `buf` a typed array (or null), `u64` handles
 * (the typed opaque pointers of lmpool.h, passed as 64-bit integers: the same registers on x86-64
 * and aarch64) and 64-bit values.
 */
export type NativeType = "i32" | "i64" | "u64" | "f32" | "buf" | "void";

/** One C function: its argument kinds and its return kind. */
export interface NativeSignature {
  readonly args: readonly NativeType[];
  readonly returns: NativeType;
}

/** LP_ABI_VERSION of the lmpool.h this table states; the loader refuses a library of another. */
export const ABI_VERSION = 4;

/** Every function lmpool.h exports (test/native/exported_abi.test.ts holds the two together). */
export const SYMBOLS = {
  lp_last_error: { args: ["buf", "i32"], returns: "i32" },
  lp_abi_version: { args: [], returns: "i32" },
  lp_backend_kind: { args: [], returns: "i32" },
  lp_device_count: { args: ["buf"], returns: "i32" },
  lp_set_device: { args: ["i32"], returns: "i32" },
  lp_device_memory: { args: ["buf"], returns: "i32" },
  lp_device_synchronize: { args: [], returns: "i32" },
  lp_rmsnorm_bf16: { args: ["buf", "buf", "buf", "i64", "i64", "f32"], returns: "i32" },
  lp_model_create: { args: ["buf", "buf"], returns: "i32" },
  lp_model_set_weight: { args: ["u64", "i32", "i32", "i32", "buf", "i64"], returns: "i32" },
  lp_model_finalize: { args: ["u64", "i32", "i32"], returns: "i32" },
  lp_model_weight_bytes: { args: ["u64", "buf"], returns: "i32" },
  lp_model_last_step_ms: { args: ["u64", "buf"], returns: "i32" },
  lp_model_last_sampling_wait_ms: { args: ["u64", "buf"], returns: "i32" },
  lp_model_destroy: { args: ["u64"], returns: "i32" },
  lp_kv_create: { args: ["u64", "i32", "i32", "buf"], returns: "i32" },
  lp_kv_block_bytes: { args: ["u64", "buf"], returns: "i32" },
  lp_kv_destroy: { args: ["u64"], returns: "i32" },
  lp_kv_gather_host: { args: ["u64", "buf", "i32", "buf"], returns: "i32" },
  lp_kv_scatter_host: { args: ["u64", "buf", "i32", "buf"], returns: "i32" },
  // KV transfer (lmpool.h "KV transfer between GPUs"); facade: ffi/kv_transfer.ts.
  lp_dev_buffer_alloc: { args: ["i32", "i64", "buf"], returns: "i32" },
  lp_dev_buffer_free: { args: ["u64"], returns: "i32" },
  lp_dev_buffer_bytes: { args: ["u64", "buf"], returns: "i32" },
  lp_dev_buffer_write: { args: ["u64", "i64", "buf", "i64"], returns: "i32" },
  lp_dev_buffer_read: { args: ["u64", "i64", "buf", "i64"], returns: "i32" },
  lp_dev_buffer_copy: { args: ["u64", "u64", "i64", "buf"], returns: "i32" },
  lp_kv_pack: { args: ["u64", "buf", "i32", "u64", "buf"], returns: "i32" },
  lp_kv_unpack: { args: ["u64", "buf", "i32", "u64", "buf"], returns: "i32" },
  lp_kv_segment_bytes: { args: ["u64", "i32", "i64", "buf"], returns: "i32" },
  lp_kv_fill_pattern: { args: ["u64", "buf", "i32", "u64"], returns: "i32" },
  lp_kv_check_pattern: { args: ["u64", "buf", "i32", "u64", "buf"], returns: "i32" },
  lp_xfer_query: { args: ["u64", "buf"], returns: "i32" },
  lp_xfer_wait: { args: ["u64", "i32"], returns: "i32" },
  lp_xfer_release: { args: ["u64"], returns: "i32" },
  lp_kv_peer_copy: { args: ["u64", "u64", "buf", "buf", "i32", "i32", "i64", "buf"], returns: "i32" },
  lp_kv_ipc_handle: { args: ["u64", "buf"], returns: "i32" },
  lp_kv_ipc_open: { args: ["buf", "u64", "i32", "buf"], returns: "i32" },
  lp_kv_ipc_close: { args: ["u64"], returns: "i32" },
  lp_nccl_version: { args: ["buf"], returns: "i32" },
  lp_nccl_unique_id: { args: ["buf"], returns: "i32" },
  lp_nccl_pair_create: { args: ["buf", "i32", "i32", "i32", "i32", "i64", "i32", "buf"], returns: "i32" },
  lp_nccl_pair_create_local: { args: ["i32", "i32", "i32", "i64", "i32", "buf"], returns: "i32" },
  lp_nccl_pair_abort: { args: ["u64"], returns: "i32" },
  lp_nccl_pair_destroy: { args: ["u64"], returns: "i32" },
  lp_kv_send: { args: ["u64", "u64", "buf", "i32", "i32", "i64", "buf"], returns: "i32" },
  lp_kv_recv: { args: ["u64", "u64", "buf", "i32", "i32", "i64", "buf"], returns: "i32" },
  lp_kv_transfer_local: { args: ["u64", "i32", "u64", "buf", "u64", "buf", "i32", "i64", "buf"], returns: "i32" },
  lp_nccl_local_sendrecv: { args: ["u64", "i32", "u64", "u64", "i64", "buf"], returns: "i32" },
  // The batch is one lp_step_batch struct, packed by ffi/step_batch.ts.
  lp_step_batch_layout: { args: ["buf", "i32"], returns: "i32" },
  lp_step: { args: ["u64", "u64", "buf"], returns: "i32" },
  lp_step_launch: { args: ["u64", "u64", "buf"], returns: "i32" },
  lp_step_collect: { args: ["u64", "i32", "buf"], returns: "i32" },
  lp_step_launch_sampling: { args: ["u64", "buf"], returns: "i32" },
  lp_bench_copy_bandwidth: { args: ["i64", "i32", "buf"], returns: "i32" },
  lp_bench_gemm_bf16: { args: ["i32", "i32", "i32", "i32", "buf"], returns: "i32" },
} as const satisfies Record<string, NativeSignature>;

/** Names of every native function. */
export type SymbolName = keyof typeof SYMBOLS;
