/* One row's sampling controls (min_p, penalties, logit bias, allowed and banned tokens, a scored
 * token, top logprobs) as lp_step_batch carries them, gathered per row, with the one rule both
 * builds use to accept a row's values and the structural check of the lists' start arrays. The
 * semantics are the lp_step comment's in lmpool.h. */
#ifndef LP_SAMPLING_CONTROLS_H
#define LP_SAMPLING_CONTROLS_H
#include <stdint.h>

#include "../include/lmpool.h"

/* One token's penalties (vLLM's formula): repetition on a token of the prompt or the output, then
 * frequency times its output count and presence when it occurred in the output. Shared with the
 * CUDA kernel so both builds compute the same float operations. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline float lp_penalized_logit(float l, int32_t count, float repetition, float frequency,
                                       float presence) {
  l = l > 0.f ? l / repetition : l * repetition;
#ifdef __CUDA_ARCH__
  /* A rounded product, as the host computes it (no fused multiply-add). */
  l -= __fmul_rn(frequency, (float)count);
#else
  l -= frequency * (float)count;
#endif
  l -= count > 0 ? presence : 0.f;
  return l;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Row r's controls: the defaults (all off) where the batch's array is NULL. */
typedef struct lp_row_controls {
  float min_p, presence, frequency, repetition;
  const int32_t *penalty_ids, *penalty_counts;
  int32_t n_penalty;
  const int32_t *bias_ids;
  const float *bias_values;
  int32_t n_bias;
  const int32_t *allowed_ids;
  int32_t n_allowed;
  const int32_t *banned_ids;
  int32_t n_banned;
  int32_t score_token; /* -1: sample */
  int32_t top_logprobs;
} lp_row_controls;

void lp_row_controls_of(const lp_step_batch *s, int32_t r, lp_row_controls *out);

/* Whether the row's values are valid (lmpool.h lists the rules); vocab bounds every token id. */
int lp_row_controls_ok(const lp_row_controls *c, int32_t vocab, int32_t max_top_logprobs);

/* Whether the row's logits need processing before sampling (allowed, banned, bias, penalties). */
int lp_row_controls_process(const lp_row_controls *c);

/* Structural check of the batch's control arrays: each start array (when present) begins at 0 and
 * never decreases, the arrays its entries index are present, max_top_logprobs is in
 * [0, min(vocab, LP_MAX_TOP_LOGPROBS)]. */
lp_status lp_check_control_arrays(const lp_step_batch *s, int32_t vocab);

/* Writes row `raw`'s processed logits to l (l may be raw): allowed, banned, bias, penalties, in
 * that order. Penalty ids must be distinct within the row (each entry applies once). */
void lp_apply_row_controls(const lp_row_controls *c, const float *raw, float *l, int64_t vocab);

#ifdef __cplusplus
}
#endif
#endif
