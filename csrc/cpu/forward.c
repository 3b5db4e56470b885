/* lp_step on the CPU: one forward pass over all layers for a flattened batch of sequences, the
 * LM head at the sampled rows only, then sampling. Semantics follow transformers'
 * LlamaForCausalLM / Qwen3ForCausalLM in fp32. */
#include <omp.h>
#include <string.h>

#include "cpu_clock.h"
#include "cpu_math.h"
#include "cpu_model.h"

static void embed_tokens(const lp_model *m, const lp_step_batch *s) {
  const int64_t H = m->cfg.hidden_size;
  for (int32_t t = 0; t < s->num_tokens; t++)
    memcpy(m->ws.h + t * H, m->embed + (int64_t)s->token_ids[t] * H, (size_t)H * sizeof(float));
  for (int32_t i = 0; i < s->num_seqs; i++)
    for (int32_t t = s->query_start[i]; t < s->query_start[i + 1]; t++) m->ws.token_seq[t] = i;
}

/* Qwen3: RMSNorm over head_dim of every q and k head, before RoPE. */
static void qk_norm(const lp_model *m, const cpu_layer *L, int64_t tokens) {
  const int64_t hd = m->cfg.head_dim, nh = m->cfg.num_heads, kvh = m->cfg.num_kv_heads;
  const float eps = m->cfg.rms_norm_eps;
#pragma omp parallel for schedule(static) if (tokens * m->qkv_dim * 4 >= LP_PARALLEL_MIN_WORK)
  for (int64_t t = 0; t < tokens; t++) {
    float *row = m->ws.qkv + t * m->qkv_dim;
    for (int64_t h = 0; h < nh; h++) cpu_rmsnorm_row(row + h * hd, L->q_norm, row + h * hd, hd, eps);
    for (int64_t h = 0; h < kvh; h++)
      cpu_rmsnorm_row(row + m->q_dim + h * hd, L->k_norm, row + m->q_dim + h * hd, hd, eps);
  }
}

static void swiglu(const lp_model *m, int64_t tokens) {
  const int64_t I = m->cfg.intermediate_size;
#pragma omp parallel for schedule(static) if (tokens * I * 16 >= LP_PARALLEL_MIN_WORK)
  for (int64_t t = 0; t < tokens; t++) {
    const float *gate = m->ws.gate_up + t * 2 * I, *up = gate + I;
    float *out = m->ws.act + t * I;
    for (int64_t i = 0; i < I; i++) out[i] = lp_silu(gate[i]) * up[i];
  }
}

static void decoder_layer(const lp_model *m, const lp_kv *kv, int32_t layer, const lp_step_batch *s) {
  const cpu_layer *L = &m->layers[layer];
  const cpu_workspace *ws = &m->ws;
  const int64_t T = s->num_tokens, H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
  const float eps = m->cfg.rms_norm_eps;

  cpu_rmsnorm_rows(ws->h, H, L->input_norm, ws->x, H, T, H, eps);
  cpu_linear(ws->x, H, T, H, L->qkv, m->qkv_dim, ws->qkv, m->qkv_dim, 0);
  if (m->cfg.arch == LP_ARCH_QWEN3) qk_norm(m, L, T);
  cpu_rope_apply(m, ws->qkv, T);
  cpu_kv_write(kv, layer, ws->qkv, m->qkv_dim, m->q_dim, m->q_dim + m->kv_dim, s->slot_mapping, T);
  cpu_attention(m, kv, layer, s);
  cpu_linear(ws->attn, m->q_dim, T, m->q_dim, L->o, H, ws->h, H, 1);

  cpu_rmsnorm_rows(ws->h, H, L->post_norm, ws->x, H, T, H, eps);
  cpu_linear(ws->x, H, T, H, L->gate_up, 2 * I, ws->gate_up, 2 * I, 0);
  swiglu(m, T);
  cpu_linear(ws->act, I, T, I, L->down, H, ws->h, H, 1);
}

static void sample_rows(const lp_model *m, const lp_step_batch *s) {
  const int64_t V = m->cfg.vocab_size;
  const cpu_workspace *ws = &m->ws;
  const int32_t max_top = s->max_top_logprobs;
#pragma omp parallel for schedule(dynamic, 1) num_threads(ws->threads) \
    if (s->num_rows > 1 && s->num_rows * V * 8 >= LP_PARALLEL_MIN_WORK)
  for (int32_t r = 0; r < s->num_rows; r++) {
    float *scratch = ws->sample_scratch + (int64_t)omp_get_thread_num() * 3 * V;
    cpu_row_sampling p;
    p.temperature = s->temperature[r], p.top_p = s->top_p[r], p.top_k = s->top_k[r];
    p.position = s->positions[s->sample_index[r]], p.max_top = max_top, p.seed = s->seed[r];
    lp_row_controls_of(s, r, &p.ctl);
    cpu_sample_row(ws->logits + r * V, V, &p, ws->gumbel_bounds, scratch, &s->out_tokens[r], &s->out_logprobs[r],
                   max_top ? s->out_top_token_ids + (int64_t)r * max_top : 0,
                   max_top ? s->out_top_logprobs + (int64_t)r * max_top : 0, s->out_ranks ? &s->out_ranks[r] : 0);
  }
}

/* After validation: the layers and the LM head at the sampled rows (logits in ws.logits). */
static void step_forward(lp_model *m, lp_kv *kv, const lp_step_batch *s) {
  const int64_t H = m->cfg.hidden_size, V = m->cfg.vocab_size;
  const int32_t num_rows = s->num_rows;
  embed_tokens(m, s);
  cpu_rope_table(m, s->positions, s->num_tokens);
  for (int32_t l = 0; l < m->cfg.num_layers; l++) decoder_layer(m, kv, l, s);
  if (num_rows == 0) return;

  for (int32_t r = 0; r < num_rows; r++)
    cpu_rmsnorm_row(m->ws.h + (int64_t)s->sample_index[r] * H, m->final_norm, m->ws.row_x + r * H, H,
                    m->cfg.rms_norm_eps);
  const float *head = m->cfg.tie_word_embeddings ? m->embed : m->lm_head;
  cpu_linear(m->ws.row_x, H, num_rows, H, head, V, m->ws.logits, V, 0);
}

/* The sampling of the rows whose logits step_forward left. */
static void step_sample(lp_model *m, const lp_step_batch *s) {
  if (s->num_rows == 0) return;
  if (s->out_logits)
    memcpy(s->out_logits, m->ws.logits, (size_t)s->num_rows * (size_t)m->cfg.vocab_size * sizeof(float));
  sample_rows(m, s);
}

lp_status lp_step_launch(lp_model *m, lp_kv *kv, const lp_step_batch *batch) {
  LP_TRY(cpu_model_check(m));
  LP_TRY(cpu_kv_check(kv));
  LP_REQUIRE(batch, "batch is NULL");
  if (m->step_pending) return LP_FAIL(LP_ERR_STATE, "lp_step_launch while the last launched step is not collected");
  LP_TRY(cpu_step_validate(m, kv, batch));
  const int deferred = batch->defer_sampling;
  if (!deferred) LP_TRY(cpu_step_validate_sampling(m, batch));
  const double t0 = cpu_clock_ms();
  if (batch->num_tokens > 0) step_forward(m, kv, batch);
  if (deferred) {
    m->forward_end_ms = cpu_clock_ms();
    m->forward_ms = m->forward_end_ms - t0;
    m->deferred_seqs = batch->num_seqs, m->deferred_tokens = batch->num_tokens, m->deferred_rows = batch->num_rows;
  } else if (batch->num_tokens > 0) {
    step_sample(m, batch);
    m->last_step_ms = cpu_clock_ms() - t0;
  }
  m->sampling_awaited = deferred;
  m->step_pending = 1;
  return LP_OK;
}

lp_status lp_step_launch_sampling(lp_model *m, const lp_step_batch *batch) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(batch, "batch is NULL");
  if (!m->step_pending || !m->sampling_awaited)
    return LP_FAIL(LP_ERR_STATE, "lp_step_launch_sampling without a step launched with defer_sampling");
  const double t0 = cpu_clock_ms();
  LP_REQUIRE(batch->num_seqs == m->deferred_seqs && batch->num_tokens == m->deferred_tokens &&
                 batch->num_rows == m->deferred_rows,
             "lp_step_launch_sampling: counts (num_seqs %d, num_tokens %d, num_rows %d) differ from the launch's "
             "(%d, %d, %d)",
             batch->num_seqs, batch->num_tokens, batch->num_rows, m->deferred_seqs, m->deferred_tokens,
             m->deferred_rows);
  /* Sampling reads positions[sample_index[r]] (the generator's key): the forward's arrays again. */
  LP_REQUIRE(batch->num_rows == 0 || (batch->sample_index && batch->positions), "null sampling array");
  for (int32_t r = 0; r < batch->num_rows; r++)
    LP_REQUIRE(batch->sample_index[r] >= 0 && batch->sample_index[r] < batch->num_tokens,
               "row %d: sample_index %d out of range [0, num_tokens=%d)", r, batch->sample_index[r],
               batch->num_tokens);
  LP_TRY(cpu_step_validate_sampling(m, batch));
  m->last_sampling_wait_ms = t0 - m->forward_end_ms;
  if (batch->num_tokens > 0) {
    step_sample(m, batch);
    m->last_step_ms = m->forward_ms + (cpu_clock_ms() - t0);
  }
  m->sampling_awaited = 0;
  return LP_OK;
}

lp_status lp_step_collect(lp_model *m, int32_t wait, int32_t *out_done) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(out_done, "out_done is NULL");
  (void)wait; /* the step ran in lp_step_launch */
  if (!m->step_pending) return LP_FAIL(LP_ERR_STATE, "lp_step_collect without a launched step");
  if (m->sampling_awaited)
    return LP_FAIL(LP_ERR_STATE, "lp_step_collect before lp_step_launch_sampling of a step launched with defer_sampling");
  m->step_pending = 0;
  *out_done = 1;
  return LP_OK;
}

lp_status lp_model_last_step_ms(lp_model *m, double *out_ms) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(out_ms, "out_ms is NULL");
  *out_ms = m->last_step_ms;
  return LP_OK;
}

lp_status lp_model_last_sampling_wait_ms(lp_model *m, double *out_ms) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(out_ms, "out_ms is NULL");
  *out_ms = m->last_sampling_wait_ms;
  return LP_OK;
}
