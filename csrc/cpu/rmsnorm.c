/* RMSNorm: the bf16 test kernel (reference for the CUDA one) and the fp32 rows used by the step. */
#include <math.h>

#include "../common/bf16.h"
#include "cpu_math.h"
#include "cpu_model.h"

lp_status lp_rmsnorm_bf16(const uint16_t *x, const uint16_t *w, uint16_t *out, int64_t rows,
                          int64_t dim, float eps) {
  LP_REQUIRE(x && w && out, "null pointer (x=%p w=%p out=%p)", (const void *)x, (const void *)w,
             (void *)out);
  LP_REQUIRE(rows >= 0 && dim > 0, "bad shape rows=%lld dim=%lld", (long long)rows, (long long)dim);
  for (int64_t r = 0; r < rows; r++) {
    const uint16_t *xr = x + r * dim;
    float ss = 0.f;
    for (int64_t i = 0; i < dim; i++) {
      float v = lp_bf16_to_f32(xr[i]);
      ss += v * v;
    }
    float inv = 1.f / sqrtf(ss / (float)dim + eps);
    for (int64_t i = 0; i < dim; i++)
      out[r * dim + i] = lp_f32_to_bf16(lp_bf16_to_f32(xr[i]) * inv * lp_bf16_to_f32(w[i]));
  }
  return LP_OK;
}

/* out = x / sqrt(mean(x^2) + eps) * w, as transformers' LlamaRMSNorm/Qwen3RMSNorm in fp32.
 * out may alias x. */
void cpu_rmsnorm_row(const float *x, const float *w, float *out, int64_t dim, float eps) {
  float inv = 1.f / sqrtf(lp_dot(x, x, dim) / (float)dim + eps);
  for (int64_t i = 0; i < dim; i++) out[i] = x[i] * inv * w[i];
}

void cpu_rmsnorm_rows(const float *x, int64_t ldx, const float *w, float *out, int64_t ldo,
                      int64_t rows, int64_t dim, float eps) {
#pragma omp parallel for schedule(static) if (rows * dim * 2 >= LP_PARALLEL_MIN_WORK)
  for (int64_t r = 0; r < rows; r++) cpu_rmsnorm_row(x + r * ldx, w, out + r * ldo, dim, eps);
}
