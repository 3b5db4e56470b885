// Embedding lookup into the fp32 residual stream and RMSNorm of residual rows into bf16 GEMM
// inputs. The residual add itself is fused into the GEMMs (beta = 1 on the fp32 residual).
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

const int kThreads = 256;

// Each thread normalizes the same elements it read, so no barrier is needed between the passes
// beyond the block reduction.
__device__ void normalize_row(const float *src, const bf16 *w, float eps, int hidden, bf16 *dst,
                              float *scratch) {
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += src[i] * src[i];
  const float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    dst[i] = __float2bfloat16(src[i] * inv * __bfloat162float(w[i]));
}

__global__ void embed_kernel(const bf16 *embed, const int32_t *tokens, int hidden, float *residual,
                             const bf16 *norm_w, float eps, bf16 *xnorm) {
  __shared__ float scratch[33];
  pdl_trigger();
  pdl_wait();
  const int t = blockIdx.x;
  const bf16 *src = embed + (size_t)tokens[t] * hidden;
  float *res = residual + (size_t)t * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) res[i] = __bfloat162float(src[i]);
  if (norm_w) normalize_row(res, norm_w, eps, hidden, xnorm + (size_t)t * hidden, scratch);
}

__global__ void rmsnorm_rows_kernel(const float *residual, const int32_t *row_map, int hidden,
                                    const bf16 *w, float eps, bf16 *out) {
  __shared__ float scratch[33];
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x;
  const int src = row_map ? row_map[r] : r;
  normalize_row(residual + (size_t)src * hidden, w, eps, hidden, out + (size_t)r * hidden, scratch);
}

}  // namespace

lp_status launch_embed(const bf16 *embed, const int32_t *tokens, int tokens_n, int hidden,
                       float *residual, const bf16 *norm_w, float eps, bf16 *xnorm,
                       cudaStream_t stream) {
  LP_REQUIRE(tokens_n > 0 && hidden > 0, "embed: bad shape tokens=%d hidden=%d", tokens_n, hidden);
  LP_REQUIRE(!norm_w || xnorm, "embed: norm weight given without an output");
  return launch_kernel(embed_kernel, tokens_n, kThreads, 0, stream, embed, tokens, hidden, residual, norm_w, eps, xnorm);
}

lp_status launch_rmsnorm_rows(const float *residual, const int32_t *row_map, int rows, int hidden,
                              const bf16 *w, float eps, bf16 *out, cudaStream_t stream) {
  LP_REQUIRE(rows > 0 && hidden > 0, "rmsnorm_rows: bad shape rows=%d hidden=%d", rows, hidden);
  return launch_kernel(rmsnorm_rows_kernel, rows, kThreads, 0, stream, residual, row_map, hidden, w, eps, out);
}
