/* Argument checks of lp_step: every index the step will follow is range-checked up front, so the
 * hot loops can trust them and a bad batch is an error naming the value, never a crash. */
#include "cpu_model.h"

static lp_status check_sequences(const lp_model *m, const lp_kv *kv, const lp_step_batch *s) {
  LP_REQUIRE(s->query_start[0] == 0, "query_start[0]=%d must be 0", s->query_start[0]);
  LP_REQUIRE(s->query_start[s->num_seqs] == s->num_tokens,
             "query_start[num_seqs=%d]=%d must equal num_tokens=%d", s->num_seqs,
             s->query_start[s->num_seqs], s->num_tokens);
  for (int32_t i = 0; i < s->num_seqs; i++) {
    const int32_t q_len = s->query_start[i + 1] - s->query_start[i], ctx = s->context_lens[i];
    LP_REQUIRE(q_len >= 1, "sequence %d has query_len %d (query_start %d..%d); must be >= 1", i,
               q_len, s->query_start[i], s->query_start[i + 1]);
    LP_REQUIRE(ctx >= q_len, "sequence %d: context_len %d < query_len %d", i, ctx, q_len);
    const int64_t blocks = ((int64_t)ctx + kv->block_size - 1) / kv->block_size;
    LP_REQUIRE(blocks <= s->max_blocks_per_seq,
               "sequence %d: context_len %d needs %lld blocks of %d, max_blocks_per_seq is %d", i,
               ctx, (long long)blocks, kv->block_size, s->max_blocks_per_seq);
    const int32_t *table = s->block_tables + (int64_t)i * s->max_blocks_per_seq;
    for (int64_t j = 0; j < blocks; j++)
      LP_REQUIRE(table[j] >= 0 && table[j] < kv->num_blocks,
                 "sequence %d: block id %d (block_tables[%d][%lld]) out of range [0, %d)", i,
                 table[j], i, (long long)j, kv->num_blocks);
    /* Attention reads the step's own K/V back through the block table: the slots written must
     * be the ones read. */
    for (int32_t t = s->query_start[i]; t < s->query_start[i + 1]; t++) {
      const int64_t c = ctx - q_len + (t - s->query_start[i]);
      const int64_t slot = (int64_t)table[c / kv->block_size] * kv->block_size + c % kv->block_size;
      LP_REQUIRE(s->slot_mapping[t] == slot,
                 "token %d (sequence %d, context index %lld): slot_mapping %d, but the block table "
                 "puts it at slot %lld",
                 t, i, (long long)c, s->slot_mapping[t], (long long)slot);
    }
  }
  return LP_OK;
}

static lp_status check_tokens(const lp_model *m, const lp_kv *kv, const lp_step_batch *s) {
  const int64_t slots = (int64_t)kv->num_blocks * kv->block_size;
  for (int32_t t = 0; t < s->num_tokens; t++) {
    LP_REQUIRE(s->token_ids[t] >= 0 && s->token_ids[t] < m->cfg.vocab_size,
               "token %d: token id %d out of range [0, vocab_size=%d)", t, s->token_ids[t],
               m->cfg.vocab_size);
    LP_REQUIRE(s->positions[t] >= 0, "token %d: position %d is negative", t, s->positions[t]);
    LP_REQUIRE(s->slot_mapping[t] >= 0 && s->slot_mapping[t] < slots,
               "token %d: slot %d out of range [0, %lld) (%d blocks x %d)", t, s->slot_mapping[t],
               (long long)slots, kv->num_blocks, kv->block_size);
  }
  return LP_OK;
}

/* Only the row's token index is structural: a row with invalid sampling parameters is skipped
 * by the sampler (lp_sampling_row_ok), not an error of the step. */
static lp_status check_rows(const lp_step_batch *s) {
  for (int32_t r = 0; r < s->num_rows; r++)
    LP_REQUIRE(s->sample_index[r] >= 0 && s->sample_index[r] < s->num_tokens,
               "row %d: sample_index %d out of range [0, num_tokens=%d)", r, s->sample_index[r],
               s->num_tokens);
  return LP_OK;
}

lp_status cpu_step_validate(const lp_model *m, const lp_kv *kv, const lp_step_batch *s) {
  const int32_t num_rows = s->num_rows;
  if (!m->finalized) return LP_FAIL(LP_ERR_STATE, "lp_step before lp_model_finalize");
  LP_REQUIRE(kv->num_layers == m->cfg.num_layers && kv->kv_heads == m->cfg.num_kv_heads &&
                 kv->head_dim == m->cfg.head_dim,
             "KV cache shape (layers %d, kv_heads %d, head_dim %d) does not match the model "
             "(%d, %d, %d)",
             kv->num_layers, kv->kv_heads, kv->head_dim, m->cfg.num_layers, m->cfg.num_kv_heads,
             m->cfg.head_dim);
  LP_REQUIRE(s->num_tokens >= 0 && s->num_tokens <= m->ws.max_tokens,
             "num_tokens=%d exceeds max_num_tokens=%d given to finalize", s->num_tokens,
             m->ws.max_tokens);
  LP_REQUIRE(s->num_seqs >= 0 && s->num_seqs <= s->num_tokens,
             "num_seqs=%d must be in [0, num_tokens=%d]", s->num_seqs, s->num_tokens);
  LP_REQUIRE(s->num_tokens == 0 || s->num_seqs > 0, "num_tokens=%d but num_seqs=0", s->num_tokens);
  LP_REQUIRE(num_rows >= 0 && num_rows <= m->ws.max_rows,
             "num_rows=%d exceeds max_num_seqs=%d given to finalize", num_rows, m->ws.max_rows);
  if (s->num_tokens > 0) {
    LP_REQUIRE(s->token_ids && s->positions && s->slot_mapping && s->query_start &&
                   s->context_lens && s->block_tables,
               "null batch array (token_ids=%p positions=%p slot_mapping=%p query_start=%p "
               "context_lens=%p block_tables=%p)",
               (const void *)s->token_ids, (const void *)s->positions,
               (const void *)s->slot_mapping, (const void *)s->query_start,
               (const void *)s->context_lens, (const void *)s->block_tables);
    LP_REQUIRE(s->max_blocks_per_seq > 0, "max_blocks_per_seq=%d must be positive",
               s->max_blocks_per_seq);
    LP_TRY(check_tokens(m, kv, s));
    LP_TRY(check_sequences(m, kv, s));
  }
  LP_REQUIRE(s->defer_sampling == 0 || s->defer_sampling == 1, "defer_sampling=%d must be 0 or 1",
             s->defer_sampling);
  if (num_rows > 0) {
    LP_REQUIRE(s->sample_index, "null sampling array (sample_index=NULL)");
    LP_TRY(check_rows(s));
  }
  return LP_OK;
}

lp_status cpu_step_validate_sampling(const lp_model *m, const lp_step_batch *s) {
  if (s->num_rows > 0)
    LP_REQUIRE(s->sample_index && s->temperature && s->top_k && s->top_p && s->seed && s->out_tokens &&
                   s->out_logprobs,
               "null sampling array (sample_index=%p temperature=%p top_k=%p top_p=%p seed=%p "
               "out_tokens=%p out_logprobs=%p)",
               (const void *)s->sample_index, (const void *)s->temperature, (const void *)s->top_k,
               (const void *)s->top_p, (const void *)s->seed, (const void *)s->out_tokens,
               (const void *)s->out_logprobs);
  return lp_check_control_arrays(s, m->cfg.vocab_size);
}
