/* lp_step of both backends: lp_step_launch, then lp_step_collect waiting for the end. */
#include "lp_error.h"

lp_status lp_step(uint64_t model, uint64_t kv, int32_t num_seqs, int32_t num_tokens,
                  const int32_t *token_ids, const int32_t *positions, const int32_t *slot_mapping,
                  const int32_t *query_start, const int32_t *context_lens,
                  const int32_t *block_tables, int32_t max_blocks_per_seq, int32_t num_rows,
                  const int32_t *sample_index, const float *temperature, const int32_t *top_k,
                  const float *top_p, const uint64_t *seed, int32_t *out_tokens,
                  float *out_logprobs, float *out_logits) {
  LP_TRY(lp_step_launch(model, kv, num_seqs, num_tokens, token_ids, positions, slot_mapping, query_start,
                        context_lens, block_tables, max_blocks_per_seq, num_rows, sample_index, temperature, top_k,
                        top_p, seed, out_tokens, out_logprobs, out_logits));
  int32_t done = 0;
  return lp_step_collect(model, 1, &done);
}
