// Embedding lookup into the fp32 residual stream and RMSNorm of residual rows into bf16 GEMM
// inputs. The residual add itself is fused into the GEMMs (beta = 1 on the fp32 residual).
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

const int kThreads = 256;
const int kHeldVecs = 4;  // 4-column groups a thread holds in registers: rows up to 4096 wide

// Each thread normalizes the same elements it read, so no barrier is needed between the passes
// beyond the block reduction. Rows of whole 4-column groups that fit in registers are read once,
// with every load issued before the reduction (a row is a few loads per thread, so its latency is
// the kernel's); others are read again.
__device__ void normalize_row(const float *src, const bf16 *w, float eps, int hidden, bf16 *dst,
                              float *scratch) {
  if (hidden % 4 == 0 && hidden <= (int)blockDim.x * 4 * kHeldVecs) {
    float4 v[kHeldVecs];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kHeldVecs; j++) {
      const int g = j * blockDim.x + threadIdx.x;
      v[j] = 4 * g < hidden ? reinterpret_cast<const float4 *>(src)[g] : make_float4(0.f, 0.f, 0.f, 0.f);
      ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    const float inv = rsqrtf(block_sum(ss, scratch) / (float)hidden + eps);
#pragma unroll
    for (int j = 0; j < kHeldVecs; j++) {
      const int g = j * blockDim.x + threadIdx.x;
      if (4 * g >= hidden) break;
      const float4 wf = bf16x4_to_f32(reinterpret_cast<const uint2 *>(w)[g]);
      reinterpret_cast<uint2 *>(dst)[g] = make_uint2(pack_bf16x2(v[j].x * inv * wf.x, v[j].y * inv * wf.y),
                                                     pack_bf16x2(v[j].z * inv * wf.z, v[j].w * inv * wf.w));
    }
    return;
  }
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
  __syncthreads();  // normalize_row's threads read other columns than they wrote
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
