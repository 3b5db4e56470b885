/* AVX2 form of lp_dot_2x4 for x86-64 CPUs that have it (the build targets x86-64-v2, SSE only).
 *
 * Each 256-bit register holds the four-lane partial sums of two tokens, so the arithmetic per
 * output is exactly lp_dot's (separate multiply and add, no FMA, same lanes, same reduction tree):
 * results are bit-identical to the SSE path, only half the instructions. */
#include "cpu_math.h"
#include "cpu_model.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

static int have_avx2;

__attribute__((constructor)) static void detect_avx2(void) {
  __builtin_cpu_init();
  have_avx2 = __builtin_cpu_supports("avx2");
}

int cpu_has_avx2(void) { return have_avx2; }

__attribute__((target("avx2"))) static inline float hsum_low(__m256 v) { return lp_hsum4((lp_v4)_mm256_castps256_ps128(v)); }
__attribute__((target("avx2"))) static inline float hsum_high(__m256 v) { return lp_hsum4((lp_v4)_mm256_extractf128_ps(v, 1)); }

__attribute__((target("avx2"))) static inline __m256 pair(const float *a, const float *b) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a)), _mm_loadu_ps(b), 1);
}

__attribute__((target("avx2"))) void cpu_dot_2x4_avx2(const float *restrict w0,
                                                      const float *restrict w1,
                                                      const float *restrict x, int64_t ldx,
                                                      int64_t n, float out[2][4]) {
  const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
  __m256 a0_01 = _mm256_setzero_ps(), a0_23 = a0_01, a1_01 = a0_01, a1_23 = a0_01;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256 v0 = _mm256_broadcast_ps((const __m128 *)(w0 + i));
    const __m256 v1 = _mm256_broadcast_ps((const __m128 *)(w1 + i));
    const __m256 x01 = pair(x0 + i, x1 + i), x23 = pair(x2 + i, x3 + i);
    a0_01 = _mm256_add_ps(a0_01, _mm256_mul_ps(v0, x01));
    a1_01 = _mm256_add_ps(a1_01, _mm256_mul_ps(v1, x01));
    a0_23 = _mm256_add_ps(a0_23, _mm256_mul_ps(v0, x23));
    a1_23 = _mm256_add_ps(a1_23, _mm256_mul_ps(v1, x23));
  }
  float s[2][4] = {{hsum_low(a0_01), hsum_high(a0_01), hsum_low(a0_23), hsum_high(a0_23)},
                   {hsum_low(a1_01), hsum_high(a1_01), hsum_low(a1_23), hsum_high(a1_23)}};
  for (; i < n; i++) {
    const float xs[4] = {x0[i], x1[i], x2[i], x3[i]};
    for (int k = 0; k < 4; k++) s[0][k] += w0[i] * xs[k], s[1][k] += w1[i] * xs[k];
  }
  memcpy(out, s, sizeof s);
}
#else
int cpu_has_avx2(void) { return 0; }
void cpu_dot_2x4_avx2(const float *w0, const float *w1, const float *x, int64_t ldx, int64_t n,
                      float out[2][4]) {
  lp_dot_2x4(w0, w1, x, ldx, n, out);
}
#endif
