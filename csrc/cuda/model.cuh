// Internal state of the CUDA build: the model (weights, workspaces, stream, cuBLAS handle) and the
// paged KV cache, the definitions of lmpool.h's opaque lp_model and lp_kv.
#ifndef LP_CUDA_MODEL_CUH
#define LP_CUDA_MODEL_CUH
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "cuda_check.h"
#include "step_meta.cuh"

typedef __nv_bfloat16 bf16;

// Largest number of key splits of one decode sequence (flash-decoding partitions); the splits of
// a (sequence, kv head) are one thread block cluster, which holds at most 16 CTAs.
#define LP_MAX_DECODE_SPLITS 16
// Steps of up to LP_GEMV_MAX_BATCH tokens run the layers' products as GEMVs (gemv.cu) instead of
// cuBLAS GEMMs; up to LP_GEMV_MAX_TOKENS the GEMVs also normalize their inputs, and the LM head
// runs as one that leaves row stats for the sampler.
#define LP_GEMV_MAX_TOKENS 2
#define LP_GEMV_MAX_BATCH 16
// Most CTAs sharing one sampled row's max / sum-of-exp pass.
#define LP_SAMPLE_MAX_PARTS 32

// Device pointers of one layer's weights (bf16). qkv is Q;K;V stacked along the output dim and
// gate_up is gate;up, so each projection is one GEMM.
struct LayerWeights {
  bf16 *input_norm, *qkv, *o, *q_norm, *k_norm, *post_norm, *gate_up, *down;
};

// Step workspaces, sized once at finalize for max_tokens tokens and max_seqs rows.
struct StepBuffers {
  float *residual;          // [max_tokens, hidden] fp32 residual stream
  bf16 *xnorm;              // [max_tokens, hidden] normalized GEMM input
  bf16 *qkv;                // [max_tokens, qkv_dim]
  bf16 *attn;               // [max_tokens, q_dim]
  bf16 *gate_up;            // [max_tokens, 2 * intermediate]
  bf16 *act;                // [max_tokens, intermediate]
  bf16 *rows_norm;          // [max_seqs, hidden] final-normed sample rows
  float *logits;            // [max_seqs, vocab]
  int32_t *sample_out;      // [3 * max_seqs]: tokens, then logprob bits, then ranks
  float4 *sample_parts;     // [max_seqs * LP_SAMPLE_MAX_PARTS] per-slice (max, sum of exp, argmax bits)
  int32_t *sample_counters; // [max_seqs] finished slices per row (zero between launches)
  float4 *head_stats;       // [LP_GEMV_MAX_TOKENS * head_stats_parts] the LM head GEMV's row stats
  int head_stats_parts;     // CTAs of that GEMV
  uint8_t *meta;            // device copy of the step metadata
  uint8_t *meta_host;       // pinned staging of the step metadata
  size_t meta_cap;          // bytes of each
  int32_t *out_host;        // pinned [3 * max_seqs]
  float *processed;         // [max_seqs, vocab] logits of rows whose controls change them (lmpool.h)
  int32_t *top_out;         // [2 * max_seqs * LP_MAX_TOP_LOGPROBS]: top token ids, then logprob bits
  int32_t *top_host;        // pinned, the same
  int32_t *lists;           // the step's control lists (int32 elements; offsets in the header)
  int32_t *lists_host;      // pinned staging of them
  size_t lists_cap;         // elements each holds (grown by step_controls.cu)
  uint8_t *row_skipped;     // host [max_seqs]: the step's row r had invalid sampling parameters
  void *cublas_ws;          // cuBLAS workspace (fixed so graph capture allocates nothing)
  size_t cublas_ws_bytes;
  float *rope_inv_freq;     // [head_dim / 2]
  float2 *rope_cos_sin;     // [max_tokens, head_dim / 2] this step's rotation table
};

struct DecodeGraphs;  // graphs.cu

struct lp_model {
  lp_model_config cfg;
  int device;
  int q_dim, kv_dim, qkv_dim;
  uint8_t *weights_base;  // one allocation holding every weight
  size_t weight_bytes;    // bytes the weights occupy (without alignment padding)
  bf16 *embed, *final_norm, *lm_head;
  LayerWeights *layers;   // host array [num_layers]
  uint8_t *present;       // host flags [(num_layers + 1) * 32]: weight handed over
  bool finalized;
  int max_tokens, max_seqs;
  int block_table_cap;    // int32 entries of the compacted block tables
  int prefill_tile_cap;
  int num_sms;
  cudaStream_t stream;
  cublasHandle_t cublas;
  StepBuffers buf;
  DecodeGraphs *graphs;
  cudaEvent_t step_begin, step_end;  // around the device part of each lp_step
  cudaEvent_t step_done;             // after the launched step's output copies
  double last_step_ms;
  // The step lp_step_launch enqueued and lp_step_collect has not finished: where its sampled
  // tokens and logprobs go (rows of them; crows rows on the device, padded for a graph).
  bool step_pending, pending_ran;
  int pending_rows, pending_crows;
  int pending_skipped;    // rows flagged in buf.row_skipped
  int32_t *pending_tokens;
  float *pending_logprobs;
  int32_t *pending_ranks;  // NULL: the step's batch has no out_ranks
  int pending_top_stride;  // the step's max_top_logprobs (0: no top outputs)
  int32_t *pending_top_ids;
  float *pending_top_logprobs;
  // A step launched with defer_sampling (lmpool.h lp_step_launch_sampling): its counts, whether its
  // sampling is still to be launched, and the events that time the device's wait for it.
  StepCounts pending_counts;
  int pending_seqs, pending_tokens_n, pending_rows_n;
  bool sampling_awaited, pending_deferred;
  cudaEvent_t meta_uploaded;                // after the forward's metadata copy (DisableTiming)
  cudaEvent_t forward_end, sampling_begin;  // the forward's last kernel; the sampling's enqueue
  double last_sampling_wait_ms;
};

struct lp_kv {
  int device, num_layers, kv_heads, head_dim;  // shape of the model it was made for
  bf16 *data;             // [L, 2, num_blocks, block_size, kv_heads, head_dim]
  int num_blocks, block_size, block_size_log2;
  size_t chunk_elems;     // block_size * kv_heads * head_dim: one block of one layer's K or V
  uint64_t id;            // unique per cache; graphs captured for another cache are stale
};

// K (side 0) or V (side 1) base of one layer.
static inline bf16 *kv_layer_base(const lp_kv *kv, int layer, int side) {
  return kv->data + ((size_t)(layer * 2 + side) * kv->num_blocks) * kv->chunk_elems;
}

#endif
