/* Rotary position embedding as transformers applies it: rotate_half (NeoX) layout, where
 * element i pairs with element i + head_dim/2, at the frequencies of common/rope_freq.h. */
#include <math.h>

#include "cpu_model.h"

/* cos/sin of angle = inv_freq[i] * position, the product rounded to fp32 as transformers computes
 * it, for every token of the step. */
void cpu_rope_table(const lp_model *m, const int32_t *positions, int64_t tokens) {
  const int64_t half = m->cfg.head_dim / 2;
#pragma omp parallel for schedule(static) if (tokens * half * 32 >= LP_PARALLEL_MIN_WORK)
  for (int64_t t = 0; t < tokens; t++) {
    for (int64_t i = 0; i < half; i++) {
      const float angle = m->inv_freq[i] * (float)positions[t];
      m->ws.rope_cos[t * half + i] = (float)cos((double)angle);
      m->ws.rope_sin[t * half + i] = (float)sin((double)angle);
    }
  }
}

/* Rotates every q and k head of every token in place (q heads then k heads lead each qkv row). */
void cpu_rope_apply(const lp_model *m, float *qkv, int64_t tokens) {
  const int64_t hd = m->cfg.head_dim, half = hd / 2;
  const int64_t heads = m->cfg.num_heads + m->cfg.num_kv_heads;
#pragma omp parallel for schedule(static) if (tokens * heads * hd * 2 >= LP_PARALLEL_MIN_WORK)
  for (int64_t t = 0; t < tokens; t++) {
    const float *cs = m->ws.rope_cos + t * half, *sn = m->ws.rope_sin + t * half;
    for (int64_t h = 0; h < heads; h++) {
      float *x = qkv + t * m->qkv_dim + h * hd;
      for (int64_t i = 0; i < half; i++) {
        const float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * cs[i] - x2 * sn[i];
        x[i + half] = x2 * cs[i] + x1 * sn[i];
      }
    }
  }
}
