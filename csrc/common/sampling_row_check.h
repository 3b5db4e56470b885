/* Which sampling parameters lp_step can sample a row with (the lp_step comment in lmpool.h). A
 * row that fails is skipped (out_tokens[r] = -1, out_logprobs[r] = NaN) instead of failing the
 * step, so one request's bad value never fails the requests batched with it. Both builds use this
 * one rule, so a row is skipped on CPU exactly when it is on CUDA. */
#ifndef LP_SAMPLING_ROW_CHECK_H
#define LP_SAMPLING_ROW_CHECK_H
#include <float.h>

/* temperature finite and >= 0 (0: greedy), top_p in (0, 1]; NaN fails every comparison. Any
 * top_k is valid (<= 0 turns it off) and so is any seed. */
static inline int lp_sampling_row_ok(float temperature, float top_p) {
  return temperature >= 0.f && temperature <= FLT_MAX && top_p > 0.f && top_p <= 1.f;
}

#endif
