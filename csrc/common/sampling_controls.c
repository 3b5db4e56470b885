/* Row controls of lp_step (see sampling_controls.h): gathering, checks, and the host version of
 * their application to a row of logits, which the CPU build samples from and the CUDA kernel
 * mirrors. */
#include "sampling_controls.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "lp_error.h"

/* [start[r], start[r + 1]) of a list, or empty where the start array is NULL. */
static int32_t list_of(const int32_t *start, int32_t r, int32_t *first) {
  if (!start) {
    *first = 0;
    return 0;
  }
  *first = start[r];
  return start[r + 1] - start[r];
}

void lp_row_controls_of(const lp_step_batch *s, int32_t r, lp_row_controls *c) {
  int32_t at;
  c->min_p = s->min_p ? s->min_p[r] : 0.f;
  c->presence = s->presence_penalty ? s->presence_penalty[r] : 0.f;
  c->frequency = s->frequency_penalty ? s->frequency_penalty[r] : 0.f;
  c->repetition = s->repetition_penalty ? s->repetition_penalty[r] : 1.f;
  c->n_penalty = list_of(s->penalty_start, r, &at);
  c->penalty_ids = s->penalty_token_ids ? s->penalty_token_ids + at : 0;
  c->penalty_counts = s->penalty_counts ? s->penalty_counts + at : 0;
  c->n_bias = list_of(s->bias_start, r, &at);
  c->bias_ids = s->bias_token_ids ? s->bias_token_ids + at : 0;
  c->bias_values = s->bias_values ? s->bias_values + at : 0;
  c->n_allowed = list_of(s->allowed_start, r, &at);
  c->allowed_ids = s->allowed_token_ids ? s->allowed_token_ids + at : 0;
  c->n_banned = list_of(s->banned_start, r, &at);
  c->banned_ids = s->banned_token_ids ? s->banned_token_ids + at : 0;
  c->score_token = s->score_token_ids ? s->score_token_ids[r] : -1;
  c->top_logprobs = s->top_logprobs ? s->top_logprobs[r] : 0;
}

static int ids_ok(const int32_t *ids, int32_t n, int32_t vocab) {
  for (int32_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab) return 0;
  return 1;
}

int lp_row_controls_ok(const lp_row_controls *c, int32_t vocab, int32_t max_top) {
  /* NaN fails every comparison, so each range test also rejects NaN. */
  if (!(c->min_p >= 0.f && c->min_p <= 1.f)) return 0;
  if (!(c->presence >= -2.f && c->presence <= 2.f)) return 0;
  if (!(c->frequency >= -2.f && c->frequency <= 2.f)) return 0;
  if (!(c->repetition > 0.f && c->repetition <= FLT_MAX)) return 0;
  if (!(c->score_token >= -1 && c->score_token < vocab)) return 0;
  if (!(c->top_logprobs >= 0 && c->top_logprobs <= max_top)) return 0;
  if (!ids_ok(c->penalty_ids, c->n_penalty, vocab) || !ids_ok(c->bias_ids, c->n_bias, vocab) ||
      !ids_ok(c->allowed_ids, c->n_allowed, vocab) || !ids_ok(c->banned_ids, c->n_banned, vocab))
    return 0;
  for (int32_t i = 0; i < c->n_penalty; i++)
    if (c->penalty_counts[i] < 0) return 0;
  for (int32_t i = 0; i < c->n_bias; i++)
    if (!(fabsf(c->bias_values[i]) <= FLT_MAX)) return 0;
  return 1;
}

int lp_row_controls_process(const lp_row_controls *c) {
  const int penalties = c->repetition != 1.f || c->frequency != 0.f || c->presence != 0.f;
  return c->n_allowed > 0 || c->n_banned > 0 || c->n_bias > 0 || (penalties && c->n_penalty > 0);
}

static lp_status check_starts(const char *name, const int32_t *start, int32_t rows, int present) {
  if (!start) return LP_OK;
  LP_REQUIRE(start[0] == 0, "%s[0]=%d must be 0", name, start[0]);
  for (int32_t r = 0; r < rows; r++)
    LP_REQUIRE(start[r + 1] >= start[r], "%s[%d]=%d is below %s[%d]=%d", name, r + 1, start[r + 1], name, r,
               start[r]);
  LP_REQUIRE(start[rows] == 0 || present, "%s lists %d entries but its arrays are NULL", name, start[rows]);
  return LP_OK;
}

lp_status lp_check_control_arrays(const lp_step_batch *s, int32_t vocab) {
  const int32_t R = s->num_rows;
  const int32_t top_cap = vocab < LP_MAX_TOP_LOGPROBS ? vocab : LP_MAX_TOP_LOGPROBS;
  LP_REQUIRE(s->max_top_logprobs >= 0 && s->max_top_logprobs <= top_cap,
             "max_top_logprobs=%d out of range [0, %d] (vocab_size %d, LP_MAX_TOP_LOGPROBS %d)", s->max_top_logprobs,
             top_cap, vocab, LP_MAX_TOP_LOGPROBS);
  LP_REQUIRE(R == 0 || s->max_top_logprobs == 0 || (s->out_top_token_ids && s->out_top_logprobs),
             "max_top_logprobs=%d but out_top_token_ids=%p out_top_logprobs=%p", s->max_top_logprobs,
             (void *)s->out_top_token_ids, (void *)s->out_top_logprobs);
  if (R == 0) return LP_OK;
  LP_TRY(check_starts("penalty_start", s->penalty_start, R, s->penalty_token_ids && s->penalty_counts));
  LP_TRY(check_starts("bias_start", s->bias_start, R, s->bias_token_ids && s->bias_values));
  LP_TRY(check_starts("allowed_start", s->allowed_start, R, s->allowed_token_ids != 0));
  LP_TRY(check_starts("banned_start", s->banned_start, R, s->banned_token_ids != 0));
  return LP_OK;
}

void lp_apply_row_controls(const lp_row_controls *c, const float *raw, float *l, int64_t vocab) {
  if (c->n_allowed > 0) {
    for (int64_t i = 0; i < vocab; i++) l[i] = -INFINITY;
    for (int32_t j = 0; j < c->n_allowed; j++) l[c->allowed_ids[j]] = raw[c->allowed_ids[j]];
  } else if (l != raw) {
    memcpy(l, raw, (size_t)vocab * sizeof *l);
  }
  for (int32_t j = 0; j < c->n_banned; j++) l[c->banned_ids[j]] = -INFINITY;
  for (int32_t j = 0; j < c->n_bias; j++) l[c->bias_ids[j]] += c->bias_values[j];
  if (c->repetition == 1.f && c->frequency == 0.f && c->presence == 0.f) return;
  for (int32_t j = 0; j < c->n_penalty; j++) {
    const int32_t id = c->penalty_ids[j], count = c->penalty_counts[j];
    l[id] = lp_penalized_logit(l[id], count, c->repetition, c->frequency, c->presence);
  }
}
