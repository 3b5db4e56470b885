/**
 * The one symbol table of the C ABI (csrc/include/lmpool.h), in a runtime-neutral form that
 * ffi/dlopen.ts turns into bun:ffi or Deno.dlopen declarations.
 * @module
 */

/** Argument/return kinds: integers and floats by value, `buf` a typed array (or null), `u64` handles. */
export type NativeType = "i32" | "i64" | "u64" | "f32" | "buf" | "void";

/** One C function: its argument kinds and its return kind. */
export interface NativeSignature {
  readonly args: readonly NativeType[];
  readonly returns: NativeType;
}

/** lp_step and lp_step_launch take the same arguments. */
const STEP_SIGNATURE = {
  args: [
    "u64", "u64", "i32", "i32", // model, kv, num_seqs, num_tokens
    "buf", "buf", "buf", // token_ids, positions, slot_mapping
    "buf", "buf", // query_start, context_lens
    "buf", "i32", // block_tables, max_blocks_per_seq
    "i32", "buf", "buf", "buf", "buf", "buf", // num_rows, sample_index, temperature, top_k, top_p, seed
    "buf", "buf", "buf", // out_tokens, out_logprobs, out_logits
  ],
  returns: "i32",
} as const satisfies NativeSignature;

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
  lp_model_destroy: { args: ["u64"], returns: "i32" },
  lp_kv_create: { args: ["u64", "i32", "i32", "buf"], returns: "i32" },
  lp_kv_block_bytes: { args: ["u64", "buf"], returns: "i32" },
  lp_kv_destroy: { args: ["u64"], returns: "i32" },
  lp_kv_gather_host: { args: ["u64", "buf", "i32", "buf"], returns: "i32" },
  lp_kv_scatter_host: { args: ["u64", "buf", "i32", "buf"], returns: "i32" },
  // KV transfer (lmpool.h "KV transfer between GPUs"); facade: ffi/kv_transfer.ts.
  lp_dev_buffer_alloc: { args: ["i32", "i64", "buf"], returns: "i32" },
  lp_dev_buffer_free: { args: ["u64"], returns: "i32" },
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
  lp_step: STEP_SIGNATURE,
  lp_step_launch: STEP_SIGNATURE,
  lp_step_collect: { args: ["u64", "i32", "buf"], returns: "i32" },
  lp_bench_copy_bandwidth: { args: ["i64", "i32", "buf"], returns: "i32" },
  lp_bench_gemm_bf16: { args: ["i32", "i32", "i32", "i32", "buf"], returns: "i32" },
} as const satisfies Record<string, NativeSignature>;

/** Names of every native function. */
export type SymbolName = keyof typeof SYMBOLS;
