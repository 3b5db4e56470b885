// Launchers of the forward-step kernels, one section per op family (one .cu file each). Every
// launcher takes its stream, checks its shapes and checks the launch.
#ifndef LP_CUDA_OPS_CUH
#define LP_CUDA_OPS_CUH
#include "model.cuh"
#include "step_meta.cuh"

// ---- norm.cu: embedding lookup and RMSNorm over the fp32 residual stream ----------------------
// residual[t] = embed[tokens[t]]; when norm_w is given also xnorm[t] = rmsnorm(residual[t]) * w.
lp_status launch_embed(const bf16 *embed, const int32_t *tokens, int tokens_n, int hidden,
                       float *residual, const bf16 *norm_w, float eps, bf16 *xnorm,
                       cudaStream_t stream);
// out[r] = rmsnorm(residual[row_map ? row_map[r] : r]) * w, as bf16.
lp_status launch_rmsnorm_rows(const float *residual, const int32_t *row_map, int rows, int hidden,
                              const bf16 *w, float eps, bf16 *out, cudaStream_t stream);

// ---- gemm.cu: cuBLAS, bf16 in, fp32 accumulate -------------------------------------------------
// Y[tokens, n_out] = X[tokens, k] . W[n_out, k]^T (+ beta * Y). Y is fp32 when y_f32, else bf16.
// The handle's stream is the model's stream.
lp_status gemm_bf16(cublasHandle_t handle, int n_out, int tokens, int k, const bf16 *w,
                    const bf16 *x, void *y, bool y_f32, float beta);
// The row count a GEMM of `rows` rows runs at (>= rows, <= cap; see gemm.cu): the callers' buffers
// hold `cap` rows, and rows past `rows` are scratch nobody reads.
int gemm_rows(int rows, int cap);
// Calls `visit` with every row count gemm_rows can return for a buffer of `cap` rows, ascending.
template <typename F>
lp_status gemm_row_buckets(int cap, F &&visit) {
  for (int r = 1; r <= cap;) {
    r = gemm_rows(r, cap);
    LP_TRY(visit(r));
    r++;
  }
  return LP_OK;
}

// ---- gemv.cu: fused small-batch matrix-vector products (decode) --------------------------------
enum GemvInput {
  GEMV_IN_BF16 = 0,  // x is bf16 [tokens, k]
  GEMV_IN_NORM = 1,  // x is the fp32 residual; rows are RMS-normalized (times norm_w) first
  // The step's first kernel: x is the bf16 embedding table and row_map the token ids; the rows are
  // normalized as for GEMV_IN_NORM, and `first` says where the step's embedding and rope table go.
  GEMV_IN_EMBED = 2,
};
// What the first kernel of a step (GEMV_IN_EMBED) stores besides its product, so that neither
// the embedding nor the rope table takes a launch of its own.
struct GemvStepStart {
  float *residual;             // the embedded rows as fp32 [tokens, k]
  const int32_t *positions;    // [tokens]
  const float *inv_freq;       // [half]
  float2 *cos_sin;             // [tokens, half]: launch_rope_table's table
  int half;
};
enum GemvOutput {
  GEMV_OUT_BF16 = 0,      // y bf16 [tokens, ldy]
  GEMV_OUT_F32 = 1,       // y fp32 [tokens, ldy]
  GEMV_OUT_ADD_F32 = 2,   // y fp32 += (the residual add)
  GEMV_OUT_SILU_MUL = 3,  // W holds gate;up (2 * n_out rows); y bf16 = silu(gate) * up
};
struct GemvArgs {
  const bf16 *w;          // [n_out (x2 for SILU_MUL), k]
  int n_out, k, tokens;
  const void *x;
  const int32_t *row_map; // GEMV_IN_NORM: residual row of token t (NULL: t); GEMV_IN_EMBED: its id
  const bf16 *norm_w;
  float eps;
  void *y;
  int ldy;
  // GEMV_OUT_F32 (NULL: none): each CTA's (max, sum of exp(y - max), lowest argmax bits, 0) over
  // the outputs it wrote, per token, at [token * gemv_grid(...) + CTA] (the sampler merges them).
  float4 *row_stats;
  int prefetch;           // set by launch_gemv: prefetch the weights into L2 before the input is ready
  int windows;            // set by launch_gemv: weight windows each warp streams along k
  GemvStepStart first;    // GEMV_IN_EMBED only
};
// Whether the fused GEMV handles this many tokens of width k read as `in`.
bool gemv_fits(int tokens, int k, GemvInput in);
// Whether the LM head runs as a fused GEMV that leaves row stats for the sampler (GEMV_IN_NORM).
bool gemv_head_fits(int rows, int k);
// CTAs launch_gemv runs for n_out outputs of width k.
int gemv_grid(GemvOutput out, int n_out, int k, int num_sms);
lp_status gemv_configure(void);
lp_status launch_gemv(GemvInput in, GemvOutput out, const GemvArgs &a, int num_sms,
                      cudaStream_t stream);

// ---- activation.cu -----------------------------------------------------------------------------
// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i]
lp_status launch_silu_mul(const bf16 *gate_up, int tokens, int inter, bf16 *out,
                          cudaStream_t stream);

// ---- rope.cu: q/k head norm, RoPE and the K/V cache write --------------------------------------
// cos_sin[t, i] = (cos, sin)(positions[t] * inv_freq[i]) (inv_freq: common/rope_freq.h), once per
// step for every layer.
lp_status launch_rope_table(const int32_t *positions, const float *inv_freq, int tokens, int half,
                            float2 *cos_sin, cudaStream_t stream);
struct RopeArgs {
  bf16 *qkv;               // [tokens, (H + 2 KV) * D]; q heads rotated in place
  int tokens;
  const int32_t *slots;
  const float2 *cos_sin;   // [tokens, head_dim / 2] from launch_rope_table
  const bf16 *q_norm, *k_norm;  // NULL: no head norm (Llama)
  float eps;
  int num_heads, num_kv_heads, head_dim;
  bf16 *k_cache, *v_cache;      // layer bases; slot s at s * KV * D
};
lp_status launch_qk_norm_rope_kv(const RopeArgs &a, cudaStream_t stream);

// ---- attention_*.cu ----------------------------------------------------------------------------
struct AttnArgs {
  const bf16 *qkv;         // q of token t at qkv + t * qkv_stride
  int qkv_stride;
  const bf16 *k_cache, *v_cache;  // layer bases
  int block_size_log2;
  int num_heads, num_kv_heads, head_dim;
  float scale;
  bf16 *out;               // [tokens, H * D]
  // Decode only, when every token of the step is a decode token: the kernel also does the rope.cu
  // prologue (q/k head norm, RoPE, this token's K/V into the cache at its slot), which then does
  // not run. qkv then holds the raw projections.
  int fused_prologue;
  const float2 *cos_sin;   // [tokens, head_dim / 2]
  const bf16 *q_norm, *k_norm;  // NULL: no head norm
  float eps;
  bf16 *k_cache_w, *v_cache_w;  // the same layer bases, writable
};
// Decode: one query token per sequence; split-K over the context, then a combine.
bool attention_decode_supported(int head_dim, int group);
// The splits of one (sequence, kv head) run as one thread block cluster and merge through
// distributed shared memory. attention_decode_configure() once before the first launch.
lp_status attention_decode_configure(void);
lp_status launch_attention_decode(const AttnArgs &a, const StepMeta &m, int num_decode, int num_sms,
                                  cudaStream_t stream);
// Prefill: causal, variable length, tensor cores; keys/values read from the paged cache.
bool attention_prefill_supported(int head_dim);
lp_status attention_prefill_configure(void);
lp_status launch_attention_prefill(const AttnArgs &a, const StepMeta &m, int num_tiles,
                                   cudaStream_t stream);
// Any head size: one warp per (token, head). Fallback for shapes the fast kernels do not cover.
lp_status launch_attention_simple(const AttnArgs &a, const StepMeta &m, int tokens, int seqs,
                                  cudaStream_t stream);

// ---- sampling.cu -------------------------------------------------------------------------------
// One token and its logprob per row of logits [rows, vocab], as lmpool.h's lp_step specifies.
// Each row's max and sum of exp are taken over `parts` slices by as many CTAs (sampling_parts:
// enough to fill the GPU); part_stats [rows * parts] is scratch, counters [rows] are zeros (the
// last CTA of a row resets its counter). When the LM head GEMV left its per-CTA stats of each row
// (head_stats [rows * head_parts], see GemvArgs::row_stats), they are merged instead (parts 1).
// Rows with sampling controls (StepMeta's per-row values and the lists) are processed into
// `processed` [rows, vocab] and sampled from there; top logprobs go to top_ids / top_logprobs at
// the header's stride (row r at r * stride).
struct SamplingBuffers {
  int32_t *out_tokens;
  float *out_logprobs;
  int32_t *top_ids;
  float *top_logprobs;
  int32_t *ranks;  // [rows] a scored row's rank (lmpool.h), else 0
  float *processed;
  const int32_t *lists;
};
int sampling_parts(int rows, int num_sms);
lp_status launch_sampling(const float *logits, int rows, int vocab, const StepMeta &m, const SamplingBuffers &out,
                          int parts, float4 *part_stats, int32_t *counters, const float4 *head_stats, int head_parts,
                          cudaStream_t stream);

#endif
