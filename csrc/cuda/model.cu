// Model lifecycle of the CUDA build: one device allocation for all bf16 weights (QKV and gate/up
// fused into one matrix each), weight hand-over with dtype conversion, and finalize().
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "../common/bf16.h"
#include "../common/weight_kinds.h"
#include "forward.cuh"
#include "graphs.cuh"
#include "model.cuh"
#include "ops.cuh"
#include "workspace.cuh"

namespace {

const int kKindSlots = 32;

// Where a weight goes and how many elements it has; NULL dst when the kind does not apply.
void weight_slot(const lp_model *m, int layer, int kind, bf16 **dst, int64_t *numel) {
  const lp_model_config &c = m->cfg;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  *dst = nullptr;
  *numel = 0;
  const bool qwen = c.arch == LP_ARCH_QWEN3;
  if (lp_weight_kind_is_global(kind)) {
    if (kind == LP_W_EMBED) *dst = m->embed, *numel = (int64_t)c.vocab_size * h;
    if (kind == LP_W_FINAL_NORM) *dst = m->final_norm, *numel = h;
    if (kind == LP_W_LM_HEAD && !c.tie_word_embeddings) *dst = m->lm_head, *numel = (int64_t)c.vocab_size * h;
    return;
  }
  const LayerWeights &w = m->layers[layer];
  switch (kind) {
    case LP_W_INPUT_NORM: *dst = w.input_norm, *numel = h; break;
    case LP_W_Q: *dst = w.qkv, *numel = (int64_t)m->q_dim * h; break;
    case LP_W_K: *dst = w.qkv + (size_t)m->q_dim * h, *numel = (int64_t)m->kv_dim * h; break;
    case LP_W_V: *dst = w.qkv + (size_t)(m->q_dim + m->kv_dim) * h, *numel = (int64_t)m->kv_dim * h; break;
    case LP_W_O: *dst = w.o, *numel = h * m->q_dim; break;
    case LP_W_Q_NORM: if (qwen) *dst = w.q_norm, *numel = c.head_dim; break;
    case LP_W_K_NORM: if (qwen) *dst = w.k_norm, *numel = c.head_dim; break;
    case LP_W_POST_NORM: *dst = w.post_norm, *numel = h; break;
    case LP_W_GATE: *dst = w.gate_up, *numel = inter * h; break;
    case LP_W_UP: *dst = w.gate_up + (size_t)inter * h, *numel = inter * h; break;
    case LP_W_DOWN: *dst = w.down, *numel = h * inter; break;
    default: break;
  }
}

// Lays every weight out in one allocation (256-byte aligned pieces) and returns its size; with
// base NULL only sizes. m->weight_bytes gets the bytes the weights themselves occupy.
size_t layout_weights(lp_model *m, uint8_t *base) {
  const lp_model_config &c = m->cfg;
  size_t off = 0;
  m->weight_bytes = 0;
  auto take = [&](int64_t elems) {
    bf16 *p = base ? (bf16 *)(base + off) : nullptr;
    off += ((size_t)elems * 2 + 255) & ~(size_t)255;
    m->weight_bytes += (size_t)elems * 2;
    return p;
  };
  const int64_t h = c.hidden_size, inter = c.intermediate_size, v = c.vocab_size;
  m->embed = take(v * h);
  m->final_norm = take(h);
  m->lm_head = c.tie_word_embeddings ? m->embed : take(v * h);
  for (int l = 0; l < c.num_layers; l++) {
    LayerWeights &w = m->layers[l];
    w.input_norm = take(h);
    w.qkv = take((int64_t)m->qkv_dim * h);
    w.o = take(h * m->q_dim);
    w.q_norm = c.arch == LP_ARCH_QWEN3 ? take(c.head_dim) : nullptr;
    w.k_norm = c.arch == LP_ARCH_QWEN3 ? take(c.head_dim) : nullptr;
    w.post_norm = take(h);
    w.gate_up = take(2 * inter * h);
    w.down = take(h * inter);
  }
  return off;
}

lp_status check_config(const lp_model_config *c) {
  LP_REQUIRE(c->arch == LP_ARCH_LLAMA || c->arch == LP_ARCH_QWEN3, "unknown arch %d", c->arch);
  LP_REQUIRE(c->vocab_size > 0 && c->hidden_size > 0 && c->intermediate_size > 0 && c->num_layers > 0,
             "bad shape vocab=%d hidden=%d intermediate=%d layers=%d", c->vocab_size, c->hidden_size,
             c->intermediate_size, c->num_layers);
  LP_REQUIRE(c->num_heads > 0 && c->num_kv_heads > 0 && c->num_heads % c->num_kv_heads == 0,
             "num_heads=%d must be a positive multiple of num_kv_heads=%d", c->num_heads, c->num_kv_heads);
  LP_REQUIRE(c->head_dim > 0 && c->head_dim % 2 == 0 && c->head_dim <= 256,
             "head_dim=%d must be even and at most 256", c->head_dim);
  LP_REQUIRE(c->rope_type == LP_ROPE_DEFAULT || c->rope_type == LP_ROPE_LLAMA3, "unknown rope_type %d",
             c->rope_type);
  LP_REQUIRE(c->rms_norm_eps >= 0.f && isfinite(c->rms_norm_eps), "rms_norm_eps=%g", (double)c->rms_norm_eps);
  LP_REQUIRE(c->rope_theta > 0.f && isfinite(c->rope_theta), "rope_theta=%g must be positive", (double)c->rope_theta);
  return LP_OK;
}

// Copies `numel` elements of `dtype` into bf16 device memory, converting on the host in chunks.
lp_status upload_bf16(bf16 *dst, int32_t dtype, const void *src, int64_t numel) {
  if (dtype == LP_DTYPE_BF16) {
    CUDA_CHECK(cudaMemcpy(dst, src, (size_t)numel * 2, cudaMemcpyHostToDevice));
    return LP_OK;
  }
  const int64_t chunk = 1 << 22;
  std::vector<uint16_t> tmp((size_t)(numel < chunk ? numel : chunk));
  for (int64_t o = 0; o < numel; o += chunk) {
    const int64_t n = numel - o < chunk ? numel - o : chunk;
    for (int64_t i = 0; i < n; i++) {
      tmp[i] = dtype == LP_DTYPE_F32 ? lp_f32_to_bf16(((const float *)src)[o + i])
                                     : lp_f32_to_bf16(lp_f16_to_f32(((const uint16_t *)src)[o + i]));
    }
    CUDA_CHECK(cudaMemcpy(dst + o, tmp.data(), (size_t)n * 2, cudaMemcpyHostToDevice));
  }
  return LP_OK;
}

void model_free(lp_model *m) {
  if (!m) return;
  cudaSetDevice(m->device);
  if (m->stream) cudaStreamSynchronize(m->stream);  // a launched step nobody collected
  if (m->graphs) decode_graphs_destroy(m->graphs);
  workspace_free(m);
  if (m->cublas) cublasDestroy(m->cublas);
  if (m->stream) cudaStreamDestroy(m->stream);
  if (m->step_begin) cudaEventDestroy(m->step_begin);
  if (m->step_end) cudaEventDestroy(m->step_end);
  if (m->step_done) cudaEventDestroy(m->step_done);
  if (m->meta_uploaded) cudaEventDestroy(m->meta_uploaded);
  if (m->forward_end) cudaEventDestroy(m->forward_end);
  if (m->sampling_begin) cudaEventDestroy(m->sampling_begin);
  cudaFree(m->weights_base);
  free(m->layers);
  free(m->present);
  free(m);
}

}  // namespace

extern "C" lp_status lp_model_create(const lp_model_config *cfg, lp_model **out_model) {
  LP_REQUIRE(cfg && out_model, "null pointer (cfg=%p out_model=%p)", (const void *)cfg, (void *)out_model);
  LP_TRY(check_config(cfg));
  lp_model *m = (lp_model *)calloc(1, sizeof(lp_model));
  if (!m) return LP_FAIL(LP_ERR_OOM, "host allocation of the model failed");
  m->cfg = *cfg;
  m->q_dim = cfg->num_heads * cfg->head_dim;
  m->kv_dim = cfg->num_kv_heads * cfg->head_dim;
  m->qkv_dim = m->q_dim + 2 * m->kv_dim;
  m->layers = (LayerWeights *)calloc((size_t)cfg->num_layers, sizeof(LayerWeights));
  m->present = (uint8_t *)calloc((size_t)(cfg->num_layers + 1) * kKindSlots, 1);
  lp_status st = LP_OK;
  cudaError_t e = cudaGetDevice(&m->device);
  if (!m->layers || !m->present) {
    st = LP_FAIL(LP_ERR_OOM, "host allocation of the layer table failed");
  } else if (e != cudaSuccess) {
    st = LP_FAIL(LP_ERR_CUDA, "cudaGetDevice: %s", cudaGetErrorString(e));
  } else {
    const size_t alloc_bytes = layout_weights(m, nullptr);
    e = cudaMalloc(&m->weights_base, alloc_bytes);
    if (e != cudaSuccess) {
      st = LP_FAIL(LP_ERR_OOM, "cudaMalloc of %zu weight bytes: %s", alloc_bytes, cudaGetErrorString(e));
    } else {
      layout_weights(m, m->weights_base);
    }
  }
  if (st != LP_OK) {
    model_free(m);
    return st;
  }
  *out_model = m;
  return LP_OK;
}

extern "C" lp_status lp_model_set_weight(lp_model *m, int32_t layer, int32_t kind, int32_t dtype, const void *data,
                                         int64_t numel) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(dtype == LP_DTYPE_BF16 || dtype == LP_DTYPE_F16 || dtype == LP_DTYPE_F32, "unknown dtype %d", dtype);
  const char *name = kind >= 0 && kind < kKindSlots ? lp_weight_kind_name(kind) : nullptr;
  LP_REQUIRE(name, "unknown weight kind %d", kind);
  if (lp_weight_kind_is_global(kind)) {
    LP_REQUIRE(layer == -1, "weight %s is global: layer must be -1, got %d", name, layer);
  } else {
    LP_REQUIRE(layer >= 0 && layer < m->cfg.num_layers, "weight %s: layer %d out of range [0, %d)", name, layer,
               m->cfg.num_layers);
    LP_REQUIRE(m->cfg.arch == LP_ARCH_QWEN3 || (kind != LP_W_Q_NORM && kind != LP_W_K_NORM),
               "weight %s exists only for Qwen3 (arch %d)", name, m->cfg.arch);
  }
  bf16 *dst;
  int64_t expected;
  weight_slot(m, layer, kind, &dst, &expected);
  // A tied model has no LM head of its own: transformers discards lm_head in favour of the
  // embedding, and so do we.
  if (kind == LP_W_LM_HEAD && m->cfg.tie_word_embeddings) expected = (int64_t)m->cfg.vocab_size * m->cfg.hidden_size;
  LP_REQUIRE(numel == expected, "weight %s (layer %d): numel %lld, expected %lld", name, layer, (long long)numel,
             (long long)expected);
  LP_REQUIRE(data, "weight %s (layer %d): data is NULL", name, layer);
  if (!dst) return LP_OK;
  CUDA_CHECK(cudaSetDevice(m->device));
  LP_TRY(upload_bf16(dst, dtype, data, numel));
  m->present[(layer + 1) * kKindSlots + kind] = 1;
  return LP_OK;
}

namespace {

lp_status check_complete(const lp_model *m) {
  const int globals[] = {LP_W_EMBED, LP_W_FINAL_NORM, LP_W_LM_HEAD};
  const int per_layer[] = {LP_W_INPUT_NORM, LP_W_Q, LP_W_K, LP_W_V, LP_W_O, LP_W_Q_NORM,
                           LP_W_K_NORM, LP_W_POST_NORM, LP_W_GATE, LP_W_UP, LP_W_DOWN};
  bf16 *dst;
  int64_t n;
  for (int kind : globals) {
    weight_slot(m, -1, kind, &dst, &n);
    if (dst && !m->present[kind]) return LP_FAIL(LP_ERR_STATE, "missing weight %s", lp_weight_kind_name(kind));
  }
  for (int l = 0; l < m->cfg.num_layers; l++) {
    for (int kind : per_layer) {
      weight_slot(m, l, kind, &dst, &n);
      if (dst && !m->present[(l + 1) * kKindSlots + kind])
        return LP_FAIL(LP_ERR_STATE, "missing weight layer %d %s", l, lp_weight_kind_name(kind));
    }
  }
  return LP_OK;
}

}  // namespace

extern "C" lp_status lp_model_finalize(lp_model *m, int32_t max_num_tokens, int32_t max_num_seqs) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(max_num_tokens > 0 && max_num_seqs > 0, "max_num_tokens=%d and max_num_seqs=%d must be positive",
             max_num_tokens, max_num_seqs);
  LP_TRY(check_complete(m));
  if (m->step_pending) return LP_FAIL(LP_ERR_STATE, "lp_model_finalize while a launched step is not collected");
  CUDA_CHECK(cudaSetDevice(m->device));
  // Finalizing again resizes the workspaces (graphs captured against the old ones go too).
  m->finalized = false;
  if (m->stream) CUDA_CHECK(cudaStreamSynchronize(m->stream));
  decode_graphs_destroy(m->graphs);
  m->graphs = nullptr;
  workspace_free(m);
  if (!m->stream) {
    CUDA_CHECK(cudaDeviceGetAttribute(&m->num_sms, cudaDevAttrMultiProcessorCount, m->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&m->cublas));
    CUBLAS_CHECK(cublasSetStream(m->cublas, m->stream));
    CUDA_CHECK(cudaEventCreate(&m->step_begin));
    CUDA_CHECK(cudaEventCreate(&m->step_end));
    CUDA_CHECK(cudaEventCreateWithFlags(&m->step_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&m->meta_uploaded, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&m->forward_end));
    CUDA_CHECK(cudaEventCreate(&m->sampling_begin));
    LP_TRY(gemv_configure());
    LP_TRY(attention_prefill_configure());
    LP_TRY(attention_decode_configure());
  }
  m->max_tokens = max_num_tokens;
  m->max_seqs = max_num_seqs;
  LP_TRY(workspace_alloc(m));
  CUBLAS_CHECK(cublasSetWorkspace(m->cublas, m->buf.cublas_ws, m->buf.cublas_ws_bytes));
  LP_TRY(gemm_warmup(m));
  LP_TRY(decode_graphs_create(m, &m->graphs));
  m->finalized = true;
  return LP_OK;
}

extern "C" lp_status lp_model_weight_bytes(lp_model *m, int64_t *out_bytes) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = (int64_t)m->weight_bytes;
  return LP_OK;
}

extern "C" lp_status lp_model_last_step_ms(lp_model *m, double *out_ms) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(out_ms, "out_ms is NULL");
  *out_ms = m->last_step_ms;
  return LP_OK;
}

extern "C" lp_status lp_model_destroy(lp_model *m) {
  if (!m) return LP_OK;
  model_free(m);
  return LP_OK;
}
