/* Step workspaces of the CPU backend, allocated once in finalize() so a step never mallocs. */
#include <omp.h>
#include <stdlib.h>

#include "cpu_model.h"

void cpu_workspace_free(cpu_workspace *ws) {
  free(ws->h), free(ws->x), free(ws->qkv), free(ws->attn), free(ws->gate_up), free(ws->act);
  free(ws->rope_cos), free(ws->rope_sin), free(ws->token_seq), free(ws->row_x), free(ws->logits);
  free(ws->attn_scratch), free(ws->sample_scratch), free(ws->gumbel_bounds);
  *ws = (cpu_workspace){0};
}

lp_status cpu_workspace_alloc(lp_model *m, int32_t max_tokens, int32_t max_rows) {
  const lp_model_config *c = &m->cfg;
  cpu_workspace *ws = &m->ws;
  const size_t T = (size_t)max_tokens, R = (size_t)max_rows, H = (size_t)c->hidden_size,
               I = (size_t)c->intermediate_size, V = (size_t)c->vocab_size, f = sizeof(float);
  const int64_t group = c->num_heads / c->num_kv_heads;
  ws->max_tokens = max_tokens;
  ws->max_rows = max_rows;
  ws->threads = omp_get_max_threads();
  /* Per thread: output accumulators, running max and running sum of each head of a GQA group. */
  ws->attn_scratch_floats = group * (c->head_dim + 2);
  const size_t threads = (size_t)ws->threads;
  int ok = (ws->h = malloc(T * H * f)) && (ws->x = malloc(T * H * f)) &&
           (ws->qkv = malloc(T * (size_t)m->qkv_dim * f)) &&
           (ws->attn = malloc(T * (size_t)m->q_dim * f)) && (ws->gate_up = malloc(T * 2 * I * f)) &&
           (ws->act = malloc(T * I * f)) &&
           (ws->rope_cos = malloc(T * (size_t)c->head_dim / 2 * f)) &&
           (ws->rope_sin = malloc(T * (size_t)c->head_dim / 2 * f)) &&
           (ws->token_seq = malloc(T * sizeof(int32_t))) && (ws->row_x = malloc(R * H * f)) &&
           (ws->logits = malloc(R * V * f)) &&
           (ws->attn_scratch = malloc(threads * (size_t)ws->attn_scratch_floats * f)) &&
           (ws->sample_scratch = malloc(threads * 3 * V * f)) &&
           (ws->gumbel_bounds = malloc(2 * LP_GUMBEL_BUCKETS * f));
  if (!ok) {
    cpu_workspace_free(ws);
    return LP_FAIL(LP_ERR_OOM, "out of memory allocating workspaces for max_num_tokens=%d max_num_seqs=%d",
                   max_tokens, max_rows);
  }
  cpu_gumbel_bounds(ws->gumbel_bounds);
  return LP_OK;
}
