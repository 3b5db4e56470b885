/*
 * Inline fp32 math of the CPU backend: dot products with a fixed summation order, and an exp
 * polynomial that the compiler can vectorize.
 *
 * Every dot product of length n, whether computed alone or in a 2 x 4 block, sums in the same
 * order (lp_dot). That makes a token's result independent of
 * which other tokens share the batch, so paged/contiguous, chunked/whole and cached/uncached
 * prefills agree bit for bit.
 */
#ifndef LP_CPU_MATH_H
#define LP_CPU_MATH_H
#include <stdint.h>
#include <string.h>

/* Four fp32 lanes (GCC/Clang vector extension: SSE on x86, NEON on arm64). */
typedef float lp_v4 __attribute__((vector_size(16)));

static inline lp_v4 lp_load4(const float *p) {
  lp_v4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline float lp_hsum4(lp_v4 a) { return (a[0] + a[2]) + (a[1] + a[3]); }

/* sum a[i] * b[i]: four lane partial sums over the multiple-of-4 prefix, a fixed tree, then the
 * tail in order. Every dot product in the backend uses exactly this order. */
static inline float lp_dot(const float *restrict a, const float *restrict b, int64_t n) {
  lp_v4 acc = {0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) acc += lp_load4(a + i) * lp_load4(b + i);
  float s = lp_hsum4(acc);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* The 2 x 4 dot products of weight rows w0, w1 with rows x + k * ldx (k < 4): each weight and
 * token vector is loaded once per 8 products. out[r][k] equals lp_dot(w_r, x + k * ldx, n). */
static inline void lp_dot_2x4(const float *restrict w0, const float *restrict w1,
                              const float *restrict x, int64_t ldx, int64_t n, float out[2][4]) {
  const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
  lp_v4 a00 = {0.f, 0.f, 0.f, 0.f}, a01 = a00, a02 = a00, a03 = a00;
  lp_v4 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const lp_v4 v0 = lp_load4(w0 + i), v1 = lp_load4(w1 + i);
    lp_v4 xv = lp_load4(x0 + i);
    a00 += v0 * xv, a10 += v1 * xv;
    xv = lp_load4(x1 + i);
    a01 += v0 * xv, a11 += v1 * xv;
    xv = lp_load4(x2 + i);
    a02 += v0 * xv, a12 += v1 * xv;
    xv = lp_load4(x3 + i);
    a03 += v0 * xv, a13 += v1 * xv;
  }
  float s[2][4] = {{lp_hsum4(a00), lp_hsum4(a01), lp_hsum4(a02), lp_hsum4(a03)},
                   {lp_hsum4(a10), lp_hsum4(a11), lp_hsum4(a12), lp_hsum4(a13)}};
  for (; i < n; i++) {
    const float xs[4] = {x0[i], x1[i], x2[i], x3[i]};
    for (int k = 0; k < 4; k++) s[0][k] += w0[i] * xs[k], s[1][k] += w1[i] * xs[k];
  }
  memcpy(out, s, sizeof s);
}

typedef int32_t lp_v4i __attribute__((vector_size(16)));

static inline int32_t lp_f32_bits(float f) {
  int32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

static inline lp_v4 lp_splat4(float x) { return (lp_v4){x, x, x, x}; }

/* mask ? a : b, lane by lane (mask lanes are all ones or zero, as comparisons give). */
static inline lp_v4 lp_select4(lp_v4i mask, lp_v4 a, lp_v4 b) {
  return (lp_v4)(((lp_v4i)a & mask) | ((lp_v4i)b & ~mask));
}

/* exp(x) to ~1 ulp (Cephes expf polynomial). Inputs are clamped to [-87.3, 88], so very negative
 * arguments give ~1e-38 instead of 0, which every caller here tolerates. Written on vectors so
 * hot loops run four lanes at once; the scalar form is lane 0, so both give identical results. */
static inline lp_v4 lp_exp4(lp_v4 x) {
  x = lp_select4(x > 88.0f, lp_splat4(88.0f), x);
  x = lp_select4(x < -87.33654f, lp_splat4(-87.33654f), x);
  const lp_v4 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  lp_v4 r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  lp_v4 p = lp_splat4(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * (lp_v4)((__builtin_convertvector(n, lp_v4i) + 127) << 23);
}

static inline float lp_expf(float x) { return lp_exp4(lp_splat4(x))[0]; }
static inline float lp_silu(float x) { return x / (1.0f + lp_expf(-x)); }

#endif
