/* fp32 linear layer y = x W^T with Hugging Face [out, in] weights.
 *
 * Work is split into tasks of LIN_ROWS output rows x LIN_TOKENS tokens. Consecutive tasks share
 * their weight rows, so a thread streams each weight block from memory once while the token rows
 * stay in cache; within a task a 2 x 4 register block shares every load (lp_dot_2x4). Each output
 * element is one lp_dot-ordered sum, so results do not depend on the batch or the thread count. */
#include "cpu_math.h"
#include "cpu_model.h"

#define LIN_ROWS 16
#define LIN_TOKENS 64

static inline void store(float *y, float v, int accumulate) { *y = accumulate ? *y + v : v; }

typedef void dot_2x4_fn(const float *w0, const float *w1, const float *x, int64_t ldx, int64_t n,
                        float out[2][4]);

static void dot_2x4_sse(const float *w0, const float *w1, const float *x, int64_t ldx, int64_t n,
                        float out[2][4]) {
  lp_dot_2x4(w0, w1, x, ldx, n, out);
}

static void linear_task(const float *x, int64_t ldx, int64_t t0, int64_t t1, int64_t in,
                        const float *w, int64_t o0, int64_t o1, float *y, int64_t ldy,
                        int accumulate, dot_2x4_fn *dot_2x4) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) {
    int64_t o = o0;
    for (; o + 2 <= o1; o += 2) {
      float s[2][4];
      dot_2x4(w + o * in, w + (o + 1) * in, x + t * ldx, ldx, in, s);
      for (int64_t k = 0; k < 4; k++) {
        store(y + (t + k) * ldy + o, s[0][k], accumulate);
        store(y + (t + k) * ldy + o + 1, s[1][k], accumulate);
      }
    }
    for (; o < o1; o++)
      for (int64_t k = 0; k < 4; k++)
        store(y + (t + k) * ldy + o, lp_dot(w + o * in, x + (t + k) * ldx, in), accumulate);
  }
  for (; t < t1; t++)
    for (int64_t o = o0; o < o1; o++)
      store(y + t * ldy + o, lp_dot(w + o * in, x + t * ldx, in), accumulate);
}

/* y[t, o] (+)= sum_i x[t, i] * w[o, i] for t < tokens, o < out. Rows of x and y have strides
 * ldx and ldy; accumulate adds into y (the residual add of o_proj and down_proj). */
void cpu_linear(const float *x, int64_t ldx, int64_t tokens, int64_t in, const float *w,
                int64_t out, float *y, int64_t ldy, int accumulate) {
  const int64_t row_blocks = (out + LIN_ROWS - 1) / LIN_ROWS;
  const int64_t token_blocks = (tokens + LIN_TOKENS - 1) / LIN_TOKENS;
  const int64_t tasks = row_blocks * token_blocks;
  dot_2x4_fn *dot_2x4 = cpu_has_avx2() ? cpu_dot_2x4_avx2 : dot_2x4_sse;
#pragma omp parallel for schedule(dynamic, 8) if (tokens * in * out >= LP_PARALLEL_MIN_WORK)
  for (int64_t task = 0; task < tasks; task++) {
    const int64_t rb = task / token_blocks, tb = task % token_blocks;
    const int64_t o0 = rb * LIN_ROWS, o1 = o0 + LIN_ROWS < out ? o0 + LIN_ROWS : out;
    const int64_t t0 = tb * LIN_TOKENS, t1 = t0 + LIN_TOKENS < tokens ? t0 + LIN_TOKENS : tokens;
    linear_task(x, ldx, t0, t1, in, w, o0, o1, y, ldy, accumulate, dot_2x4);
  }
}
