/*
 * lmpool.h — the one C ABI of LMPool's native library.
 *
 * Two builds implement it: liblmpool_cpu.so (plain C, fp32 arithmetic, the reference used by CI)
 * and liblmpool_cuda.so (CUDA kernels, cuBLAS GEMMs, NCCL, CUDA graphs; bf16 storage, fp32
 * accumulation).
 *
 * Conventions
 * - Every call returns an lp_status: LP_OK (0) or a negative error code. On error the message
 *   (with file:line and the CUDA/cuBLAS/NCCL error string where there is one) is kept per thread
 *   and copied out by lp_last_error(). Nothing here exits or aborts the host process.
 * - Handles are typed opaque pointers (lp_model, lp_kv, lp_dev_buffer, lp_xfer_job,
 *   lp_nccl_pair); the FFI layer passes them as 64-bit integers. Destroying NULL is a no-op.
 * - Only the functions marked LP_API are exported: both builds compile with
 *   -fvisibility=hidden, so internal helpers stay inside the library.
 * - Arrays passed in are host memory owned by the caller, valid for the duration of the call.
 * - Weights are handed over once (lp_model_set_weight) and converted to the backend's storage
 *   type: bf16 on CUDA, fp32 on CPU.
 */
#ifndef LMPOOL_H
#define LMPOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LP_ABI_VERSION 4

/* Marks a function of the ABI: exported, while the builds hide every other symbol. */
#if defined(__GNUC__)
#define LP_API __attribute__((visibility("default")))
#else
#define LP_API
#endif

/* Opaque handles. A KV view made by lp_kv_ipc_open is an lp_kv too (closed with lp_kv_ipc_close). */
typedef struct lp_model lp_model;           /* weights and step workspaces on one device */
typedef struct lp_kv lp_kv;                 /* a paged KV cache, or a CUDA IPC view of another's */
typedef struct lp_dev_buffer lp_dev_buffer; /* device memory for packed payloads */
typedef struct lp_xfer_job lp_xfer_job;     /* an enqueued transfer; NULL: complete on return */
typedef struct lp_nccl_pair lp_nccl_pair;   /* two NCCL communicators of a direct pair */

typedef int32_t lp_status;
enum {
  LP_OK = 0,
  LP_ERR_INVALID = -1,     /* bad argument: shape, index, null pointer */
  LP_ERR_OOM = -2,         /* allocation failed */
  LP_ERR_CUDA = -3,        /* CUDA runtime error */
  LP_ERR_CUBLAS = -4,      /* cuBLAS error */
  LP_ERR_NCCL = -5,        /* NCCL error */
  LP_ERR_UNSUPPORTED = -6, /* not available in this build */
  LP_ERR_STATE = -7,       /* call out of order (e.g. step before finalize) */
  LP_ERR_TIMEOUT = -8,     /* a bounded wait ran out (e.g. a transfer whose peer never came) */
};

/* Element types of tensors handed in. */
enum { LP_DTYPE_BF16 = 0, LP_DTYPE_F16 = 1, LP_DTYPE_F32 = 2 };

/* ---------------------------------------------------------------------------------------------
 * Library and device
 * ------------------------------------------------------------------------------------------- */

/* Copies the last error message of this thread into buf (NUL-terminated, truncated to cap).
 * Returns the full message length. */
LP_API int32_t lp_last_error(char *buf, int32_t cap);
/* LP_ABI_VERSION of the build. */
LP_API int32_t lp_abi_version(void);
/* 0 = cpu, 1 = cuda. */
LP_API int32_t lp_backend_kind(void);
/* Number of usable devices (CPU build: 1). */
LP_API lp_status lp_device_count(int32_t *out_count);
/* Selects the device for this thread's following calls (CPU build: only 0). */
LP_API lp_status lp_set_device(int32_t device);
/* Free and total device memory in bytes (CPU build: physical memory). out is int64[2]. */
LP_API lp_status lp_device_memory(int64_t *out_free_total);
/* Waits for all work queued on the current device. */
LP_API lp_status lp_device_synchronize(void);

/* ---------------------------------------------------------------------------------------------
 * Kernels exposed for tests and benchmarks (host pointers in, host pointers out)
 * ------------------------------------------------------------------------------------------- */

/* out[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * w ; bf16 in/out, fp32 math. */
LP_API lp_status lp_rmsnorm_bf16(const uint16_t *x, const uint16_t *w, uint16_t *out, int64_t rows,
                                 int64_t dim, float eps);

/* ---------------------------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------------------------- */

enum { LP_ARCH_LLAMA = 0, LP_ARCH_QWEN3 = 1 };
enum { LP_ROPE_DEFAULT = 0, LP_ROPE_LLAMA3 = 1 };

/* Model shape; filled by the TypeScript config parser. Passed as int32/float fields laid out in
 * this order (see ffi/model_config.ts). */
typedef struct lp_model_config {
  int32_t arch;               /* LP_ARCH_* */
  int32_t vocab_size;
  int32_t hidden_size;
  int32_t intermediate_size;
  int32_t num_layers;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t tie_word_embeddings; /* 1: lm_head shares embed_tokens */
  int32_t rope_type;           /* LP_ROPE_* */
  int32_t rope_original_max_position; /* llama3 scaling */
  int32_t max_position;
  float rms_norm_eps;
  float rope_theta;
  float rope_factor;           /* llama3 scaling */
  float rope_low_freq_factor;
  float rope_high_freq_factor;
} lp_model_config;

/* Weight kinds. Global ones take layer = -1. q/k norm exist only for Qwen3. lm_head is absent
 * when tie_word_embeddings. Shapes are the Hugging Face ones ([out, in] for linear layers). */
enum {
  LP_W_EMBED = 0,       /* [vocab, hidden] */
  LP_W_FINAL_NORM = 1,  /* [hidden] */
  LP_W_LM_HEAD = 2,     /* [vocab, hidden] */
  LP_W_INPUT_NORM = 10, /* [hidden] */
  LP_W_Q = 11,          /* [heads*head_dim, hidden] */
  LP_W_K = 12,          /* [kv_heads*head_dim, hidden] */
  LP_W_V = 13,          /* [kv_heads*head_dim, hidden] */
  LP_W_O = 14,          /* [hidden, heads*head_dim] */
  LP_W_Q_NORM = 15,     /* [head_dim] */
  LP_W_K_NORM = 16,     /* [head_dim] */
  LP_W_POST_NORM = 17,  /* [hidden] (post_attention_layernorm) */
  LP_W_GATE = 18,       /* [intermediate, hidden] */
  LP_W_UP = 19,         /* [intermediate, hidden] */
  LP_W_DOWN = 20,       /* [hidden, intermediate] */
};

/* Creates an empty model on the current device. cfg points to an lp_model_config. */
LP_API lp_status lp_model_create(const lp_model_config *cfg, lp_model **out_model);
/* Copies one weight in (converted to the storage type). numel must match the expected shape. */
LP_API lp_status lp_model_set_weight(lp_model *model, int32_t layer, int32_t kind, int32_t dtype,
                                     const void *data, int64_t numel);
/* Checks every required weight is present (error names the first missing one) and prepares
 * execution (fused layouts, workspaces sized for max_num_tokens tokens and max_num_seqs rows). */
LP_API lp_status lp_model_finalize(lp_model *model, int32_t max_num_tokens, int32_t max_num_seqs);
/* Bytes of device memory held by the weights. */
LP_API lp_status lp_model_weight_bytes(lp_model *model, int64_t *out_bytes);
/* Execution time of the last lp_step that ran tokens, in ms: on CUDA the device time from the
 * metadata copy's end to the last kernel (events on the step's stream), on the CPU the compute
 * time; 0 before the first such step. Set against the caller's wall time, it separates host
 * overhead from device work. */
LP_API lp_status lp_model_last_step_ms(lp_model *model, double *out_ms);
/* Of the last collected step launched with defer_sampling (see lp_step_launch_sampling), how long
 * the device stood idle between the end of the forward pass and the enqueue of the sampling, in
 * ms: on CUDA the device time between an event after the forward's last kernel and one recorded
 * when lp_step_launch_sampling has packed the controls (about 0 while the forward still ran then);
 * on the CPU, where the forward ends inside lp_step_launch, the host time from that end to
 * lp_step_launch_sampling's call. 0 before such a step. The caller's host work between the two
 * calls that this does not cover is what the forward pass hid. */
LP_API lp_status lp_model_last_sampling_wait_ms(lp_model *model, double *out_ms);
LP_API lp_status lp_model_destroy(lp_model *model);

/* ---------------------------------------------------------------------------------------------
 * Paged KV cache: one tensor [L, 2, num_blocks, block_size, kv_heads, head_dim] per worker
 * (fp32 on CPU, bf16 on CUDA). Slot s = block * block_size + offset.
 * ------------------------------------------------------------------------------------------- */

LP_API lp_status lp_kv_create(lp_model *model, int32_t num_blocks, int32_t block_size, lp_kv **out_kv);
/* Bytes of one block across all layers, K and V (the transfer unit). */
LP_API lp_status lp_kv_block_bytes(lp_kv *kv, int64_t *out_bytes);
LP_API lp_status lp_kv_destroy(lp_kv *kv);

/* Gathers n blocks (all layers, K and V) into one packed [L, 2, n, block_size, kv_heads,
 * head_dim] host buffer of n * block_bytes, and the reverse. For tests and the CPU transfer path. */
LP_API lp_status lp_kv_gather_host(lp_kv *kv, const int32_t *block_ids, int32_t n, void *dst);
LP_API lp_status lp_kv_scatter_host(lp_kv *kv, const int32_t *block_ids, int32_t n, const void *src);

/* ---------------------------------------------------------------------------------------------
 * KV transfer between GPUs (csrc/cuda/kv_*.cu, nccl_*.cu, peer_copy.cu; CPU: csrc/cpu/kv_transfer.c)
 *
 * The wire format of a transfer of n blocks is the packed tensor [L, 2, n, block_size, kv_heads,
 * head_dim] (chunk c = (layer * 2 + K/V) * n + i is block block_ids[i] of that layer and side).
 * Large transfers move it as consecutive segments through a small ring of staging slots so that
 * packing, the link and unpacking overlap; both ends derive the same segments from n, the block
 * bytes and segment_bytes (0: the default rule, see lp_kv_segment_bytes).
 *
 * Transfers are asynchronous: each call enqueues device work and hands back a job (NULL means
 * nothing is pending). lp_xfer_wait takes a timeout, so a peer that never posts its half cannot
 * hang the caller; after a timeout on an NCCL pair, lp_nccl_pair_abort unblocks the device.
 * Ordering: a transfer reads and writes the blocks as they are when it is called; work the
 * caller queued earlier on other streams must be complete (lp_step returns complete), and the
 * destination blocks must not be read until the job is done.
 * ------------------------------------------------------------------------------------------- */

/* Device buffers for packed payloads (CPU build: host memory). */
LP_API lp_status lp_dev_buffer_alloc(int32_t device, int64_t bytes, lp_dev_buffer **out_buf);
LP_API lp_status lp_dev_buffer_free(lp_dev_buffer *buf);
LP_API lp_status lp_dev_buffer_bytes(lp_dev_buffer *buf, int64_t *out_bytes);
/* Host <-> device copies of a byte range; complete on return. For tests and validation. */
LP_API lp_status lp_dev_buffer_write(lp_dev_buffer *buf, int64_t offset, const void *src, int64_t bytes);
LP_API lp_status lp_dev_buffer_read(lp_dev_buffer *buf, int64_t offset, void *dst, int64_t bytes);
/* Copies bytes from src to dst (same or different devices: cudaMemcpyPeerAsync on the copy
 * engine). The raw-link baseline of the transfer benchmark. */
LP_API lp_status lp_dev_buffer_copy(lp_dev_buffer *dst_buf, lp_dev_buffer *src_buf, int64_t bytes,
                                    lp_xfer_job **out_job);

/* Packs n blocks into buf (n * block_bytes bytes at offset 0) with one kernel per launch of up to
 * LP_KV_MAX_TRANSFER_BLOCKS ids, and the reverse. out_job NULL: complete on return. */
#define LP_KV_MAX_TRANSFER_BLOCKS 2048
LP_API lp_status lp_kv_pack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf,
                            lp_xfer_job **out_job);
LP_API lp_status lp_kv_unpack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf,
                              lp_xfer_job **out_job);
/* Segment size (bytes) a transfer of n blocks uses; segment_bytes 0 = the default rule. */
LP_API lp_status lp_kv_segment_bytes(lp_kv *kv, int32_t n, int64_t segment_bytes, int64_t *out_bytes);

/* Validation: fills the n blocks with a pattern keyed by (seed, i, layer, side, word) and counts
 * the 4-byte words that differ from it. A pattern written through blocks a and read through
 * blocks b matches exactly when every byte of a arrived at b. Complete on return. */
LP_API lp_status lp_kv_fill_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed);
LP_API lp_status lp_kv_check_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed,
                                     int64_t *out_mismatched_words);

/* Jobs. query: out_done = 1 when complete. wait: LP_OK when complete, LP_ERR_TIMEOUT when
 * timeout_ms (>= 0) passes first (the job stays pending), LP_ERR_NCCL when its pair failed or
 * was aborted. release frees the handle (pending device work still completes). */
LP_API lp_status lp_xfer_query(lp_xfer_job *job, int32_t *out_done);
LP_API lp_status lp_xfer_wait(lp_xfer_job *job, int32_t timeout_ms);
LP_API lp_status lp_xfer_release(lp_xfer_job *job);

/* Same-process device-to-device copy of blocks src_ids of src_kv into dst_ids of dst_kv (both
 * caches of one model shape; either may be a view from lp_kv_ipc_open; one cache is allowed when
 * the two block lists are disjoint). Modes:
 *  LP_PEER_COPY_ENGINE: pack on the source device, cudaMemcpyPeerAsync of each packed segment,
 *    unpack on the destination device (pipelined through staging rings);
 *  LP_PEER_KERNEL: one kernel on the source device reads the source blocks and stores straight
 *    into the destination blocks over NVLink (no staging);
 *  LP_PEER_COPY_ENGINE_DIRECT: copy engine only, no kernels: one strided copy per block.
 * CPU build: a host memcpy (same semantics, complete on return). */
enum { LP_PEER_COPY_ENGINE = 0, LP_PEER_KERNEL = 1, LP_PEER_COPY_ENGINE_DIRECT = 2 };
LP_API lp_status lp_kv_peer_copy(lp_kv *src_kv, lp_kv *dst_kv, const int32_t *src_ids, const int32_t *dst_ids,
                                 int32_t n, int32_t mode, int64_t segment_bytes, lp_xfer_job **out_job);

/* CUDA IPC: a 64-byte handle of a KV cache's tensor, and its mapping in another process as a
 * KV view with the shape of like_kv (same model and block size) and num_blocks blocks. A view is
 * a valid kv argument of the transfer calls; close it with lp_kv_ipc_close, never lp_kv_destroy.
 * CPU build: LP_ERR_UNSUPPORTED. */
LP_API lp_status lp_kv_ipc_handle(lp_kv *kv, void *out_handle64);
LP_API lp_status lp_kv_ipc_open(const void *handle64, lp_kv *like_kv, int32_t num_blocks, lp_kv **out_view);
LP_API lp_status lp_kv_ipc_close(lp_kv *view);

/* NCCL (loaded at run time from libnccl.so.2; CPU build and builds without NCCL:
 * LP_ERR_UNSUPPORTED). out_version: NCCL_VERSION_CODE of the loaded library. */
LP_API lp_status lp_nccl_version(int32_t *out_version);
/* 128 bytes; rank 0 makes it, the control plane relays it to rank 1. */
LP_API lp_status lp_nccl_unique_id(void *out_id128);
/* One direct pair, one rank per process: two communicators (one per direction, so transfers in
 * both directions run concurrently), their streams and staging rings (4 slots of slot_bytes,
 * 0 = 32 MiB, per direction) on `device`, warmed with one send each way. Both ranks call it;
 * it fails with LP_ERR_TIMEOUT if the peer has not joined within timeout_ms. nchannels > 0 pins
 * NCCL's CTA/channel count (ncclConfig_t minCTAs = maxCTAs); 0 keeps NCCL's choice (and its
 * NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS environment). NVLink multicast is never enabled. */
LP_API lp_status lp_nccl_pair_create(const void *unique_id128, int32_t nranks, int32_t rank, int32_t device,
                                     int32_t nchannels, int64_t slot_bytes, int32_t timeout_ms,
                                     lp_nccl_pair **out_pair);
/* Both ranks of a pair in this process (ranks 0 and 1 on device0 and device1): benchmarks/tests. */
LP_API lp_status lp_nccl_pair_create_local(int32_t device0, int32_t device1, int32_t nchannels,
                                           int64_t slot_bytes, int32_t timeout_ms, lp_nccl_pair **out_pair);
/* Aborts the communicators (device work of the pair stops; pending jobs fail). The pair can
 * only be destroyed afterwards. */
LP_API lp_status lp_nccl_pair_abort(lp_nccl_pair *pair);
/* Finalizes (bounded by the create timeout; aborts if the peer is gone) and frees the pair. */
LP_API lp_status lp_nccl_pair_destroy(lp_nccl_pair *pair);
/* Sender and receiver halves of one transfer on a cross-process pair: pack -> ncclSend per
 * segment, and ncclRecv -> unpack. peer must be the other rank. Per direction, both ranks must
 * issue their halves in the same plan order. */
LP_API lp_status lp_kv_send(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                            int64_t segment_bytes, lp_xfer_job **out_job);
LP_API lp_status lp_kv_recv(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                            int64_t segment_bytes, lp_xfer_job **out_job);
/* Both halves on a local pair, src_rank's device to the other's. */
LP_API lp_status lp_kv_transfer_local(lp_nccl_pair *pair, int32_t src_rank, lp_kv *src_kv, const int32_t *src_ids,
                                      lp_kv *dst_kv, const int32_t *dst_ids, int32_t n, int64_t segment_bytes,
                                      lp_xfer_job **out_job);
/* Raw link baseline on a local pair: one plain ncclSend/ncclRecv of `bytes` between buffers. */
LP_API lp_status lp_nccl_local_sendrecv(lp_nccl_pair *pair, int32_t src_rank, lp_dev_buffer *src_buf,
                                        lp_dev_buffer *dst_buf, int64_t bytes, lp_xfer_job **out_job);

/* ---------------------------------------------------------------------------------------------
 * Forward step: one call runs every layer for a flattened batch of sequences, described by one
 * lp_step_batch (pointers and counts, like llama.cpp's llama_batch).
 *
 * Sequence i owns tokens [query_start[i], query_start[i+1]) of this step. Its context after the
 * step is context_lens[i] tokens (cached + this step's); the step's tokens are the last
 * query_len of them, at the given positions. K/V of each step token is written at
 * slot_mapping[t]; attention for sequence i reads its first context_lens[i] tokens through
 * block_tables[i * max_blocks_per_seq + j] (causal within the step). Prefill, chunked prefill,
 * prefix-cache hits and decode are all this one shape.
 *
 * The LM head runs only at the num_rows token indices in sample_index; row r samples with
 * temperature[r] (0 = greedy), top_k[r] (<= 0: off), top_p[r] (1: off) and a counter-based
 * generator keyed by (seed[r], positions[sample_index[r]]), so a seeded request is
 * reproducible regardless of batching. Outputs: out_tokens[r], out_logprobs[r] (log-softmax of
 * the raw logits at the chosen token); out_logits (NULL or [num_rows, vocab] fp32 raw logits)
 * is for tests.
 *
 * Sampling (identical semantics in both builds, so a seeded request samples the same token on
 * CPU and CUDA up to floating-point ties):
 * - temperature == 0: argmax of the logits (lowest index on ties).
 * - else z_i = logit_i / temperature. top_k > 0 keeps the tokens whose z is >= the k-th largest
 *   z. top_p < 1 then keeps, of those, the smallest set of most likely tokens whose renormalized
 *   softmax(z) mass reaches top_p (every token whose probability is >= the cutoff probability).
 *   The sample is the argmax over kept tokens of z_i + g_i with Gumbel noise
 *   g_i = -log(-log(u_i)), u_i = ((h_i >> 40) + 0.5) * 2^-24,
 *   h_i = mix64(mix64(seed + 0x9E3779B97F4A7C15 * (position + 1)) ^ i), where position is
 *   positions[sample_index[r]] and mix64 is the splitmix64 finalizer
 *   (z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31).
 * - out_logprobs[r] = log_softmax(raw logits)[chosen], before temperature and the controls below.
 *
 * Sampling controls (vLLM's order; every array is optional, NULL turning the control off for all
 * rows). Before sampling, a row's logits l are processed in this order:
 *  1. allowed_token_ids (the row's list non-empty): every other token's l = -inf;
 *  2. banned_token_ids: l = -inf (the caller resolves bad_words and the like into this list);
 *  3. bias: l[id] += value;
 *  4. penalties over the row's penalty list, one entry per distinct token of the prompt and the
 *     output with count = its occurrences in the output (0: prompt only): repetition r (1: off)
 *     makes l = l > 0 ? l / r : l * r; then l -= frequency * count and l -= presence * (count > 0).
 * Greedy rows take the argmax of the processed logits (lowest index on ties). Sampled rows divide
 * by temperature, then min_p (0: off) drops the tokens whose exp(z - max z) < min_p (as
 * -inf), then top-k, top-p and the Gumbel sample as above, over the processed z.
 * A row's list is [start[r], start[r + 1]) of its *_start array into the matching id/value arrays;
 * a row's penalty ids are distinct (each entry applies once). A row whose controls exclude every
 * token is not sampled: token -1, logprob NaN.
 *
 * Top logprobs: max_top_logprobs <= LP_MAX_TOP_LOGPROBS; top_logprobs[r] = k in [0, max_top_logprobs] asks for the k most likely tokens of
 * log_softmax(raw logits) (the distribution out_logprobs reads), written sorted (logprob
 * descending, lowest index on ties) to out_top_token_ids / out_top_logprobs[r * max_top_logprobs
 * + j], j < k; entries j >= k are -1 / NaN. Only k ids and values per row leave the device.
 *
 * Scored rows: score_token_ids[r] >= 0 makes row r not sampled: out_tokens[r] is that token and
 * out_logprobs[r] its logprob (prompt logprobs: the next prompt token); -1 samples as usual. With
 * out_ranks, out_ranks[r] is the scored token's rank: the number of tokens whose raw logit is >= its
 * own (itself and ties included, NaN never; vLLM's `(logprobs >= token's logprob).sum()`), and 0 for
 * a sampled or refused row.
 *
 * Errors: a structural fault of the batch (counts over the finalize limits, a token id, position,
 * slot, block id or sample_index out of range, inconsistent query_start / context_lens / slot
 * mapping, a control list's start array not ascending from 0) fails the whole step with
 * LP_ERR_INVALID, naming the value. A row whose sampling parameters are invalid (temperature NaN,
 * infinite or < 0; top_p NaN or not in (0, 1]; min_p NaN or not in [0, 1]; presence or frequency
 * not in [-2, 2]; repetition NaN, infinite or <= 0; a bias value not finite; a penalty count < 0;
 * a token id of its lists or its score token >= vocab_size; top_logprobs not in
 * [0, max_top_logprobs]) fails only itself: it is not sampled, out_tokens[r] = -1 and out_logprobs[r] = NaN (its sequence's
 * tokens still run through the layers and write their K/V), every other row is sampled as usual,
 * and the step returns LP_OK. The caller finds such rows by the -1 and fails their sequences alone.
 * Any top_k and seed are valid.
 * ------------------------------------------------------------------------------------------- */

/* Most top logprobs one row may ask for (the stride bound of out_top_*). */
#define LP_MAX_TOP_LOGPROBS 64

/* One step's batch. The struct is read during the call only; the arrays it points to are host
 * memory of the caller (outputs: see lp_step_launch for how long they must live). A count of 0
 * allows NULL for its arrays. ffi/step_batch.ts packs this layout; lp_step_batch_layout
 * describes it so a test can hold the two together. */
typedef struct lp_step_batch {
  int32_t num_seqs;
  int32_t num_tokens;
  int32_t max_blocks_per_seq;
  int32_t num_rows;
  int32_t max_top_logprobs;    /* stride of the out_top_* arrays; 0: no row asks for top logprobs */
  int32_t defer_sampling;      /* 1: lp_step_launch runs the forward pass only (lp_step_launch_sampling) */
  const int32_t *token_ids;    /* [num_tokens] */
  const int32_t *positions;    /* [num_tokens] */
  const int32_t *slot_mapping; /* [num_tokens] */
  const int32_t *query_start;  /* [num_seqs + 1] */
  const int32_t *context_lens; /* [num_seqs] */
  const int32_t *block_tables; /* [num_seqs * max_blocks_per_seq] */
  const int32_t *sample_index; /* [num_rows] token indices whose logits are computed */
  const float *temperature;    /* [num_rows] */
  const int32_t *top_k;        /* [num_rows] */
  const float *top_p;          /* [num_rows] */
  const uint64_t *seed;        /* [num_rows] */
  int32_t *out_tokens;         /* [num_rows] */
  float *out_logprobs;         /* [num_rows] */
  float *out_logits;           /* NULL or [num_rows * vocab_size] */
  /* Sampling controls (see above); NULL: off for every row. */
  const float *min_p;              /* [num_rows] 0: off */
  const float *presence_penalty;   /* [num_rows] 0: off */
  const float *frequency_penalty;  /* [num_rows] 0: off */
  const float *repetition_penalty; /* [num_rows] 1: off */
  const int32_t *penalty_start;    /* [num_rows + 1] */
  const int32_t *penalty_token_ids; /* distinct per row */
  const int32_t *penalty_counts;   /* occurrences in the output */
  const int32_t *bias_start;       /* [num_rows + 1] */
  const int32_t *bias_token_ids;
  const float *bias_values;
  const int32_t *allowed_start;    /* [num_rows + 1] */
  const int32_t *allowed_token_ids;
  const int32_t *banned_start;     /* [num_rows + 1] */
  const int32_t *banned_token_ids;
  const int32_t *score_token_ids;  /* [num_rows] -1: sample */
  const int32_t *top_logprobs;     /* [num_rows] k per row */
  int32_t *out_top_token_ids;      /* [num_rows * max_top_logprobs] */
  float *out_top_logprobs;         /* [num_rows * max_top_logprobs] */
  int32_t *out_ranks;              /* NULL or [num_rows]: a scored row's rank, else 0 */
} lp_step_batch;

/* Writes "size=S name@offset ..." (every field of lp_step_batch in declaration order) into buf
 * (NUL-terminated, truncated to cap) and returns the full length, like lp_last_error. */
LP_API int32_t lp_step_batch_layout(char *buf, int32_t cap);

LP_API lp_status lp_step(lp_model *model, lp_kv *kv, const lp_step_batch *batch);

/* lp_step in two halves, so the calling thread is free while the device runs the step (a worker
 * then reads its control messages meanwhile): lp_step_launch takes lp_step's arguments, checks
 * them and enqueues the step; the batch's output arrays must stay valid until the step is
 * collected (the struct itself need not). lp_step_collect with wait = 0 sets *out_done = 0 while
 * the step runs and returns at once; with wait = 1 it returns when the step ended. On
 * *out_done = 1 the outputs are filled and the next step may be launched. One step at a time per
 * model (a launch before the collect, or a collect without a launch, is LP_ERR_STATE). The CPU
 * backend computes the step in lp_step_launch. lp_step is lp_step_launch followed by
 * lp_step_collect(wait = 1). */
LP_API lp_status lp_step_launch(lp_model *model, lp_kv *kv, const lp_step_batch *batch);
LP_API lp_status lp_step_collect(lp_model *model, int32_t wait, int32_t *out_done);

/* The sampling of a step launched with defer_sampling = 1, so the caller can compute controls
 * (structured-output masks) on the host while the device runs the forward pass. Such a launch
 * checks and enqueues the layers and the LM head at the sample_index rows, and reads none of the
 * batch's sampling values (temperature, top_k, top_p, seed), controls or outputs; it never
 * replays a graph that samples. lp_step_launch_sampling then takes the same batch with those
 * filled in (the counts and the forward's arrays unchanged; a count that differs from the launch
 * is LP_ERR_INVALID), checks them as lp_step does, uploads them and enqueues the sampling after
 * the forward pass; the outputs follow lp_step_launch's rules and lp_step_collect ends the step as
 * usual. Tokens, logprobs and errors equal those of the one-shot step on the same batch. Calls out
 * of order are LP_ERR_STATE: lp_step_launch_sampling without a deferred launch or twice, and
 * lp_step_collect (or lp_step) before it. A failed lp_step_launch_sampling leaves the step waiting
 * for a valid one. The CPU backend computes the forward pass in lp_step_launch and the sampling
 * here. lp_step refuses a batch with defer_sampling set (LP_ERR_INVALID). */
LP_API lp_status lp_step_launch_sampling(lp_model *model, const lp_step_batch *batch);

/* ---------------------------------------------------------------------------------------------
 * Benchmark ceilings: what bench/ reports measured step times against
 * ------------------------------------------------------------------------------------------- */

/* Copies `bytes` within device memory `iters` times (after a warm-up) and reports bytes read plus
 * bytes written per second (2 * bytes per copy). CPU build: memcpy in host memory. */
LP_API lp_status lp_bench_copy_bandwidth(int64_t bytes, int32_t iters, double *out_bytes_per_s);
/* Runs a bf16 GEMM C[m,n] = A[m,k] B[k,n] (fp32 accumulation) on random data `iters` times after a
 * warm-up and reports 2*m*n*k FLOPs per second. CUDA: cuBLAS; CPU: the reference's own loop. */
LP_API lp_status lp_bench_gemm_bf16(int32_t m, int32_t n, int32_t k, int32_t iters, float *out_flops_per_s);

#ifdef __cplusplus
}
#endif
#endif /* LMPOOL_H */
