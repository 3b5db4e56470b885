/* Model lifecycle of the CPU backend: config checks, create, weight hand-over, finalize, destroy,
 * and the handle check. Weight storage itself is weights.c's; it calls nothing here. */
#include <math.h>
#include <stdlib.h>

#include "../common/rope_freq.h"
#include "cpu_model.h"

lp_status cpu_model_check(const lp_model *m) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(m->magic == LP_CPU_MODEL_MAGIC, "handle %p is not a live CPU model", (const void *)m);
  return LP_OK;
}

static lp_status check_config(const lp_model_config *c) {
  LP_REQUIRE(c->arch == LP_ARCH_LLAMA || c->arch == LP_ARCH_QWEN3, "unknown arch %d", c->arch);
  LP_REQUIRE(c->vocab_size > 0 && c->hidden_size > 0 && c->intermediate_size > 0 &&
                 c->num_layers > 0,
             "bad shape: vocab_size=%d hidden_size=%d intermediate_size=%d num_layers=%d",
             c->vocab_size, c->hidden_size, c->intermediate_size, c->num_layers);
  LP_REQUIRE(c->num_heads > 0 && c->num_kv_heads > 0 && c->num_heads % c->num_kv_heads == 0,
             "num_heads=%d must be a positive multiple of num_kv_heads=%d", c->num_heads,
             c->num_kv_heads);
  LP_REQUIRE(c->head_dim > 0 && c->head_dim % 2 == 0, "head_dim=%d must be positive and even",
             c->head_dim);
  LP_REQUIRE(c->tie_word_embeddings == 0 || c->tie_word_embeddings == 1,
             "tie_word_embeddings=%d must be 0 or 1", c->tie_word_embeddings);
  LP_REQUIRE(c->rms_norm_eps >= 0.f && isfinite(c->rms_norm_eps), "rms_norm_eps=%g", c->rms_norm_eps);
  LP_REQUIRE(c->rope_theta > 0.f && isfinite(c->rope_theta), "rope_theta=%g must be positive",
             c->rope_theta);
  LP_REQUIRE(c->rope_type == LP_ROPE_DEFAULT || c->rope_type == LP_ROPE_LLAMA3,
             "unknown rope_type %d", c->rope_type);
  if (c->rope_type == LP_ROPE_LLAMA3) {
    LP_REQUIRE(c->rope_factor > 0.f && c->rope_original_max_position > 0 &&
                   c->rope_low_freq_factor > 0.f &&
                   c->rope_high_freq_factor > c->rope_low_freq_factor,
               "bad llama3 rope scaling: factor=%g original_max_position=%d low_freq_factor=%g "
               "high_freq_factor=%g",
               c->rope_factor, c->rope_original_max_position, c->rope_low_freq_factor,
               c->rope_high_freq_factor);
  }
  return LP_OK;
}

static void model_free(lp_model *m) {
  cpu_workspace_free(&m->ws);
  cpu_weights_free(m);
  free(m->inv_freq);
  m->magic = 0;
  free(m);
}

lp_status lp_model_create(const lp_model_config *cfg, lp_model **out_model) {
  LP_REQUIRE(cfg && out_model, "null pointer (cfg=%p out_model=%p)", (const void *)cfg,
             (void *)out_model);
  LP_TRY(check_config(cfg));
  lp_model *m = calloc(1, sizeof *m);
  if (!m) return LP_FAIL(LP_ERR_OOM, "out of memory allocating the model");
  m->magic = LP_CPU_MODEL_MAGIC;
  m->cfg = *cfg;
  m->q_dim = (int64_t)cfg->num_heads * cfg->head_dim;
  m->kv_dim = (int64_t)cfg->num_kv_heads * cfg->head_dim;
  m->qkv_dim = m->q_dim + 2 * m->kv_dim;
  m->inv_freq = malloc((size_t)cfg->head_dim / 2 * sizeof(float));
  if (m->inv_freq) lp_rope_inv_freq(cfg, m->inv_freq);
  lp_status st = m->inv_freq ? cpu_weights_alloc(m)
                             : LP_FAIL(LP_ERR_OOM, "out of memory allocating rope frequencies");
  if (st != LP_OK) {
    model_free(m);
    return st;
  }
  *out_model = m;
  return LP_OK;
}

lp_status lp_model_set_weight(lp_model *m, int32_t layer, int32_t kind, int32_t dtype, const void *data,
                              int64_t numel) {
  LP_TRY(cpu_model_check(m));
  return cpu_weights_set(m, layer, kind, dtype, data, numel);
}

lp_status lp_model_weight_bytes(lp_model *m, int64_t *out_bytes) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = cpu_weights_bytes(m);
  return LP_OK;
}

lp_status lp_model_finalize(lp_model *m, int32_t max_num_tokens, int32_t max_num_seqs) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(max_num_tokens > 0 && max_num_seqs > 0,
             "max_num_tokens=%d and max_num_seqs=%d must be positive", max_num_tokens, max_num_seqs);
  LP_TRY(cpu_weights_check_complete(m));
  m->finalized = 0;
  cpu_workspace_free(&m->ws);
  LP_TRY(cpu_workspace_alloc(m, max_num_tokens, max_num_seqs));
  m->finalized = 1;
  return LP_OK;
}

lp_status lp_model_destroy(lp_model *m) {
  if (!m) return LP_OK;
  LP_TRY(cpu_model_check(m));
  model_free(m);
  return LP_OK;
}
