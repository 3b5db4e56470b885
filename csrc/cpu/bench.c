/* Benchmark ceilings of the CPU build: host memcpy bandwidth and the rate of the backend's own
 * linear layer (fp32 arithmetic on bf16-valued data), the ceilings `bench native-step --quick`
 * compares the CPU step against. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/bf16.h"
#include "../common/lp_error.h"
#include "cpu_clock.h"
#include "cpu_model.h"

static double now_s(void) { return cpu_clock_ms() / 1e3; }

/* Deterministic values in [-1, 1), rounded to bf16 like the CUDA build's inputs. */
static void fill_random(float *p, size_t n, uint32_t salt) {
  for (size_t i = 0; i < n; i++) {
    uint32_t x = (uint32_t)i * 2654435761u ^ salt;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    p[i] = lp_bf16_to_f32(lp_f32_to_bf16((float)(x & 0xffff) / 32768.f - 1.f));
  }
}

lp_status lp_bench_copy_bandwidth(int64_t bytes, int32_t iters, double *out_bytes_per_s) {
  LP_REQUIRE(bytes >= 16 && iters > 0 && out_bytes_per_s, "bad arguments bytes=%lld iters=%d", (long long)bytes,
             iters);
  unsigned char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
  if (!src || !dst) {
    free(src);
    free(dst);
    return LP_FAIL(LP_ERR_OOM, "cannot allocate 2 x %lld bytes", (long long)bytes);
  }
  for (int64_t i = 0; i < bytes; i++) src[i] = (unsigned char)(i * 131u + 7u);
  memcpy(dst, src, (size_t)bytes); /* warm-up: touches every page */
  const double t0 = now_s();
  for (int32_t i = 0; i < iters; i++) {
    memcpy(dst, src, (size_t)bytes);
    src[i % bytes] ^= dst[(i * 31) % bytes]; /* keeps the copies from being elided */
  }
  const double dt = now_s() - t0;
  free(src);
  free(dst);
  *out_bytes_per_s = 2.0 * (double)bytes * iters / (dt > 0 ? dt : 1e-9);
  return LP_OK;
}

lp_status lp_bench_gemm_bf16(int32_t m, int32_t n, int32_t k, int32_t iters, float *out_flops_per_s) {
  LP_REQUIRE(m > 0 && n > 0 && k > 0 && iters > 0 && out_flops_per_s, "bad arguments m=%d n=%d k=%d iters=%d", m,
             n, k, iters);
  /* C[m, n] = A[m, k] B[k, n] as the backend's linear layer: A is the [out, in] weight, B^T the
   * [tokens, in] activations, C^T the [tokens, out] output. */
  float *a = malloc(sizeof(float) * (size_t)m * k), *bt = malloc(sizeof(float) * (size_t)n * k);
  float *ct = malloc(sizeof(float) * (size_t)n * m);
  if (!a || !bt || !ct) {
    free(a);
    free(bt);
    free(ct);
    return LP_FAIL(LP_ERR_OOM, "cannot allocate a %dx%dx%d GEMM", m, n, k);
  }
  fill_random(a, (size_t)m * k, 7u);
  fill_random(bt, (size_t)n * k, 11u);
  cpu_linear(bt, k, n, k, a, m, ct, m, 0); /* warm-up */
  const double t0 = now_s();
  for (int32_t i = 0; i < iters; i++) cpu_linear(bt, k, n, k, a, m, ct, m, 0);
  const double dt = now_s() - t0;
  free(a);
  free(bt);
  free(ct);
  *out_flops_per_s = (float)(2.0 * m * n * (double)k * iters / (dt > 0 ? dt : 1e-9));
  return LP_OK;
}
