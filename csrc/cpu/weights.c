/* Model weights of the CPU backend: where each (layer, kind) lives in the fused fp32 buffers,
 * conversion from bf16/f16/f32 on set, the bytes held, and the completeness check of finalize().
 * model.c's ABI entry points call these; nothing here calls back into model.c. */
#include <stdlib.h>

#include "../common/bf16.h"
#include "../common/weight_kinds.h"
#include "cpu_model.h"

/* Where a weight goes and how many elements it has. *dst is NULL for lm_head of a tied model,
 * whose value transformers discards in favour of embed_tokens. */
static lp_status locate(const lp_model *m, int32_t layer, int32_t kind, float **dst, int64_t *numel) {
  const lp_model_config *c = &m->cfg;
  const int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, D = c->head_dim;
  const char *name = lp_weight_kind_name(kind);
  *dst = NULL, *numel = 0;
  LP_REQUIRE(name, "unknown weight kind %d", kind);
  if (lp_weight_kind_is_global(kind)) {
    LP_REQUIRE(layer == -1, "weight %s is global: layer must be -1, got %d", name, layer);
    *numel = kind == LP_W_FINAL_NORM ? H : V * H;
    *dst = kind == LP_W_EMBED ? m->embed : kind == LP_W_FINAL_NORM ? m->final_norm : m->lm_head;
    return LP_OK;
  }
  LP_REQUIRE(layer >= 0 && layer < c->num_layers, "weight %s: layer %d out of range [0, %d)", name,
             layer, c->num_layers);
  LP_REQUIRE(c->arch == LP_ARCH_QWEN3 || (kind != LP_W_Q_NORM && kind != LP_W_K_NORM),
             "weight %s exists only for Qwen3 (arch %d)", name, c->arch);
  const cpu_layer *L = &m->layers[layer];
  switch (kind) {
  case LP_W_INPUT_NORM: *dst = L->input_norm; *numel = H; break;
  case LP_W_POST_NORM: *dst = L->post_norm; *numel = H; break;
  case LP_W_Q: *dst = L->qkv; *numel = m->q_dim * H; break;
  case LP_W_K: *dst = L->qkv + m->q_dim * H; *numel = m->kv_dim * H; break;
  case LP_W_V: *dst = L->qkv + (m->q_dim + m->kv_dim) * H; *numel = m->kv_dim * H; break;
  case LP_W_O: *dst = L->o; *numel = H * m->q_dim; break;
  case LP_W_Q_NORM: *dst = L->q_norm; *numel = D; break;
  case LP_W_K_NORM: *dst = L->k_norm; *numel = D; break;
  case LP_W_GATE: *dst = L->gate_up; *numel = I * H; break;
  case LP_W_UP: *dst = L->gate_up + I * H; *numel = I * H; break;
  case LP_W_DOWN: *dst = L->down; *numel = H * I; break;
  }
  return LP_OK;
}

static int is_required(const lp_model *m, int32_t kind) {
  if (kind == LP_W_LM_HEAD) return !m->cfg.tie_word_embeddings;
  if (kind == LP_W_Q_NORM || kind == LP_W_K_NORM) return m->cfg.arch == LP_ARCH_QWEN3;
  return 1;
}

static int is_present(const lp_model *m, int32_t layer, int32_t kind) {
  if (lp_weight_kind_is_global(kind)) return (m->global_present >> kind) & 1u;
  return (m->layers[layer].present >> (kind - LP_W_INPUT_NORM)) & 1u;
}

static void convert_to_f32(float *dst, int32_t dtype, const void *src, int64_t n) {
  const uint16_t *h = (const uint16_t *)src;
  const float *f = (const float *)src;
#pragma omp parallel for schedule(static) if (n >= LP_PARALLEL_MIN_WORK)
  for (int64_t i = 0; i < n; i++)
    dst[i] = dtype == LP_DTYPE_BF16 ? lp_bf16_to_f32(h[i])
             : dtype == LP_DTYPE_F16 ? lp_f16_to_f32(h[i])
                                     : f[i];
}

lp_status cpu_weights_set(lp_model *m, int32_t layer, int32_t kind, int32_t dtype, const void *data, int64_t numel) {
  LP_REQUIRE(dtype == LP_DTYPE_BF16 || dtype == LP_DTYPE_F16 || dtype == LP_DTYPE_F32,
             "unknown dtype %d", dtype);
  float *dst;
  int64_t expected;
  LP_TRY(locate(m, layer, kind, &dst, &expected));
  LP_REQUIRE(numel == expected, "weight %s (layer %d): numel %lld, expected %lld",
             lp_weight_kind_name(kind), layer, (long long)numel, (long long)expected);
  LP_REQUIRE(data, "weight %s (layer %d): data is NULL", lp_weight_kind_name(kind), layer);
  if (!dst) return LP_OK; /* lm_head of a tied model */
  convert_to_f32(dst, dtype, data, numel);
  if (lp_weight_kind_is_global(kind)) m->global_present |= 1u << kind;
  else m->layers[layer].present |= 1u << (kind - LP_W_INPUT_NORM);
  return LP_OK;
}

lp_status cpu_weights_check_complete(const lp_model *m) {
  for (int32_t kind = LP_W_EMBED; kind <= LP_W_LM_HEAD; kind++)
    if (is_required(m, kind) && !is_present(m, -1, kind))
      return LP_FAIL(LP_ERR_STATE, "missing weight %s", lp_weight_kind_name(kind));
  for (int32_t l = 0; l < m->cfg.num_layers; l++)
    for (int32_t kind = LP_W_INPUT_NORM; kind <= LP_W_DOWN; kind++)
      if (is_required(m, kind) && !is_present(m, l, kind))
        return LP_FAIL(LP_ERR_STATE, "missing weight layer %d %s", l, lp_weight_kind_name(kind));
  return LP_OK;
}

int64_t cpu_weights_bytes(const lp_model *m) {
  int64_t total = 0;
  for (int32_t l = -1; l < m->cfg.num_layers; l++) {
    int32_t first = l < 0 ? LP_W_EMBED : LP_W_INPUT_NORM, last = l < 0 ? LP_W_LM_HEAD : LP_W_DOWN;
    for (int32_t kind = first; kind <= last; kind++) {
      float *dst;
      int64_t numel;
      if (!lp_weight_kind_name(kind) || !is_present(m, l, kind)) continue;
      if (locate(m, l, kind, &dst, &numel) == LP_OK) total += numel * (int64_t)sizeof(float);
    }
  }
  return total;
}

lp_status cpu_weights_alloc(lp_model *m) {
  const lp_model_config *c = &m->cfg;
  const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size,
               V = (size_t)c->vocab_size, D = (size_t)c->head_dim, f = sizeof(float);
  m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
  int ok = m->layers != NULL;
  /* calloc: pages are only committed when a weight is written. */
  ok = ok && (m->embed = calloc(V * H, f)) && (m->final_norm = calloc(H, f));
  if (ok && !c->tie_word_embeddings) ok = (m->lm_head = calloc(V * H, f)) != NULL;
  for (int32_t l = 0; ok && l < c->num_layers; l++) {
    cpu_layer *L = &m->layers[l];
    ok = (L->input_norm = calloc(H, f)) && (L->post_norm = calloc(H, f)) &&
         (L->qkv = calloc((size_t)m->qkv_dim * H, f)) && (L->o = calloc(H * (size_t)m->q_dim, f)) &&
         (L->gate_up = calloc(2 * I * H, f)) && (L->down = calloc(H * I, f));
    if (ok && c->arch == LP_ARCH_QWEN3) ok = (L->q_norm = calloc(D, f)) && (L->k_norm = calloc(D, f));
  }
  if (!ok) return LP_FAIL(LP_ERR_OOM, "out of memory allocating weights (vocab %d, hidden %d, %d layers)",
                          c->vocab_size, c->hidden_size, c->num_layers);
  return LP_OK;
}

void cpu_weights_free(lp_model *m) {
  if (m->layers) {
    for (int32_t l = 0; l < m->cfg.num_layers; l++) {
      cpu_layer *L = &m->layers[l];
      free(L->input_norm), free(L->post_norm), free(L->qkv), free(L->o);
      free(L->gate_up), free(L->down), free(L->q_norm), free(L->k_norm);
    }
  }
  free(m->layers), free(m->embed), free(m->final_norm), free(m->lm_head);
  m->layers = NULL, m->embed = m->final_norm = m->lm_head = NULL;
}
