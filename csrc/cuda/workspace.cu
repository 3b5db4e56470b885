// Allocation of the step workspaces (see workspace.cuh).
#include <stdlib.h>

#include <vector>

#include "../common/rope_freq.h"
#include "ops.cuh"
#include "workspace.cuh"

namespace {

const size_t kCublasWorkspaceBytes = 32u << 20;

template <class T>
lp_status device_alloc(T **p, size_t count, const char *what) {
  cudaError_t e = cudaMalloc((void **)p, count * sizeof(T) + 16);
  if (e != cudaSuccess)
    return LP_FAIL(LP_ERR_OOM, "cudaMalloc of %s (%zu bytes): %s", what, count * sizeof(T), cudaGetErrorString(e));
  return LP_OK;
}

}  // namespace

lp_status workspace_alloc(lp_model *m) {
  const lp_model_config &c = m->cfg;
  const size_t T = (size_t)m->max_tokens, S = (size_t)m->max_seqs, h = (size_t)c.hidden_size;
  const size_t inter = (size_t)c.intermediate_size;
  StepBuffers &b = m->buf;
  LP_TRY(device_alloc(&b.residual, T * h, "residual"));
  LP_TRY(device_alloc(&b.xnorm, T * h, "xnorm"));
  LP_TRY(device_alloc(&b.qkv, T * (size_t)m->qkv_dim, "qkv"));
  LP_TRY(device_alloc(&b.attn, T * (size_t)m->q_dim, "attn"));
  LP_TRY(device_alloc(&b.gate_up, T * 2 * inter, "gate_up"));
  LP_TRY(device_alloc(&b.act, T * inter, "act"));
  LP_TRY(device_alloc(&b.rows_norm, S * h, "rows_norm"));
  LP_TRY(device_alloc(&b.logits, S * (size_t)c.vocab_size, "logits"));
  LP_TRY(device_alloc(&b.sample_out, 3 * S, "sample outputs"));
  LP_TRY(device_alloc(&b.sample_parts, S * LP_SAMPLE_MAX_PARTS, "sampling slice stats"));
  LP_TRY(device_alloc(&b.sample_counters, S, "sampling slice counters"));
  CUDA_CHECK(cudaMemset(b.sample_counters, 0, S * sizeof(int32_t)));
  b.head_stats_parts = gemv_grid(GEMV_OUT_F32, c.vocab_size, c.hidden_size, m->num_sms);
  LP_TRY(device_alloc(&b.head_stats, (size_t)LP_GEMV_MAX_TOKENS * b.head_stats_parts, "LM head row stats"));
  // Metadata capacity: every array at its maximum, block tables compacted to the longest context.
  int ctx_bound = c.max_position;
  if (ctx_bound < m->max_tokens) ctx_bound = m->max_tokens;
  if (ctx_bound < 8192) ctx_bound = 8192;
  m->block_table_cap = (int)(S * (size_t)((ctx_bound + 15) / 16));
  m->prefill_tile_cap = (int)(T / LP_PREFILL_TILE + S + 1);
  StepCounts cap = {m->max_tokens, m->max_seqs, m->max_seqs, m->max_seqs, m->prefill_tile_cap, 0};
  b.meta_cap = step_layout(cap).total + (size_t)m->block_table_cap * 4 + 64;
  LP_TRY(device_alloc(&b.meta, b.meta_cap, "step metadata"));
  cudaError_t e = cudaMallocHost((void **)&b.meta_host, b.meta_cap);
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_OOM, "cudaMallocHost metadata: %s", cudaGetErrorString(e));
  e = cudaMallocHost((void **)&b.out_host, 3 * S * sizeof(int32_t));
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_OOM, "cudaMallocHost outputs: %s", cudaGetErrorString(e));
  LP_TRY(device_alloc(&b.processed, S * (size_t)c.vocab_size, "processed logits"));
  LP_TRY(device_alloc(&b.top_out, 2 * S * LP_MAX_TOP_LOGPROBS, "top logprob outputs"));
  e = cudaMallocHost((void **)&b.top_host, 2 * S * LP_MAX_TOP_LOGPROBS * sizeof(int32_t));
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_OOM, "cudaMallocHost top logprobs: %s", cudaGetErrorString(e));
  b.row_skipped = (uint8_t *)calloc(S, 1);
  if (!b.row_skipped) return LP_FAIL(LP_ERR_OOM, "row flags (%zu bytes)", S);
  b.cublas_ws_bytes = kCublasWorkspaceBytes;
  LP_TRY(device_alloc((uint8_t **)&b.cublas_ws, b.cublas_ws_bytes, "cuBLAS workspace"));
  std::vector<float> inv((size_t)c.head_dim / 2);
  lp_rope_inv_freq(&c, inv.data());
  LP_TRY(device_alloc(&b.rope_inv_freq, inv.size(), "rope frequencies"));
  LP_TRY(device_alloc(&b.rope_cos_sin, T * inv.size(), "rope table"));
  CUDA_CHECK(cudaMemcpy(b.rope_inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  return LP_OK;
}

void workspace_free(lp_model *m) {
  StepBuffers &b = m->buf;
  void *dev[] = {b.residual, b.xnorm, b.qkv, b.attn, b.gate_up, b.act, b.rows_norm, b.logits,
                 b.sample_out, b.sample_parts, b.sample_counters, b.head_stats, b.meta,
                 b.cublas_ws, b.rope_inv_freq, b.rope_cos_sin, b.processed, b.top_out, b.lists};
  for (void *p : dev) cudaFree(p);
  cudaFreeHost(b.meta_host);
  cudaFreeHost(b.out_host);
  cudaFreeHost(b.top_host);
  cudaFreeHost(b.lists_host);
  free(b.row_skipped);
  b = StepBuffers{};
}
