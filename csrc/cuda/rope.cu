// Per-token attention prologue in one kernel: Qwen3's per-head q/k RMSNorm, rotary embedding in
// Hugging Face's rotate_half layout (element i pairs with i + head_dim/2), and the write of this
// step's K and V into the paged cache at slot_mapping[t].
#include <math.h>

#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"
#include "rope_rotate.cuh"

namespace {

const int kWarps = 4;  // one warp per head; grid (token, head group)

// Computed once per step, read by every layer.
__global__ void rope_table_kernel(const int32_t *positions, const float *inv_freq, int tokens, int half,
                                  float2 *cos_sin) {
  pdl_trigger();
  pdl_wait();
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)tokens * half) return;
  cos_sin[i] = rope_table_entry(positions, inv_freq, half, i);
}
const int kMaxPairsPerLane = 4;  // head_dim <= 256

__global__ void qk_norm_rope_kv_kernel(RopeArgs a) {
  pdl_trigger();
  pdl_wait();
  const int t = blockIdx.x, lane = threadIdx.x & 31;
  const int D = a.head_dim, half = D / 2, H = a.num_heads, KV = a.num_kv_heads;
  const int q_dim = H * D, kv_dim = KV * D;
  bf16 *row = a.qkv + (size_t)t * (q_dim + 2 * kv_dim);
  const int slot = a.slots[t];
  const float2 *cs = a.cos_sin + (size_t)t * half;
  for (int u = blockIdx.y * kWarps + (threadIdx.x >> 5); u < H + 2 * KV; u += gridDim.y * kWarps) {
    if (u >= H + KV) {  // V head: copy into the cache
      if (slot < 0) continue;
      const int g = u - H - KV;
      const bf16 *src = row + q_dim + kv_dim + g * D;
      bf16 *dst = a.v_cache + (size_t)slot * kv_dim + g * D;
      for (int i = lane; i < D; i += 32) dst[i] = src[i];
      continue;
    }
    const bool is_q = u < H;
    if (!is_q && slot < 0) continue;
    bf16 *src = is_q ? row + u * D : row + q_dim + (u - H) * D;
    const bf16 *norm_w = is_q ? a.q_norm : a.k_norm;
    float x1[kMaxPairsPerLane], x2[kMaxPairsPerLane];
    float ss = 0.f;
#pragma unroll
    for (int p = 0; p < kMaxPairsPerLane; p++) {
      const int j = lane + 32 * p;
      x1[p] = j < half ? __bfloat162float(src[j]) : 0.f;
      x2[p] = j < half ? __bfloat162float(src[j + half]) : 0.f;
      ss += x1[p] * x1[p] + x2[p] * x2[p];
    }
    float inv = 1.f;
    if (norm_w) inv = rsqrtf(warp_sum(ss) / (float)D + a.eps);
    bf16 *dst = is_q ? src : a.k_cache + (size_t)slot * kv_dim + (u - H) * D;
#pragma unroll
    for (int p = 0; p < kMaxPairsPerLane; p++) {
      const int j = lane + 32 * p;
      if (j >= half) break;
      float v1 = x1[p], v2 = x2[p];
      if (norm_w) {
        v1 = round_bf16(v1 * inv * __bfloat162float(norm_w[j]));
        v2 = round_bf16(v2 * inv * __bfloat162float(norm_w[j + half]));
      }
      const float2 r = rope_rotate(v1, v2, cs[j]);
      dst[j] = __float2bfloat16(r.x);
      dst[j + half] = __float2bfloat16(r.y);
    }
  }
}

}  // namespace

lp_status launch_rope_table(const int32_t *positions, const float *inv_freq, int tokens, int half,
                            float2 *cos_sin, cudaStream_t stream) {
  LP_REQUIRE(tokens > 0 && half > 0, "rope table: bad shape tokens=%d half=%d", tokens, half);
  const size_t n = (size_t)tokens * half;
  return launch_kernel(rope_table_kernel, (unsigned)((n + 255) / 256), 256, 0, stream, positions, inv_freq, tokens,
                       half, cos_sin);
}

lp_status launch_qk_norm_rope_kv(const RopeArgs &a, cudaStream_t stream) {
  LP_REQUIRE(a.tokens > 0 && a.num_heads > 0 && a.num_kv_heads > 0, "rope: bad shape tokens=%d heads=%d/%d",
             a.tokens, a.num_heads, a.num_kv_heads);
  LP_REQUIRE(a.head_dim % 2 == 0 && a.head_dim <= 64 * kMaxPairsPerLane, "rope: head_dim=%d unsupported",
             a.head_dim);
  LP_REQUIRE((a.q_norm == nullptr) == (a.k_norm == nullptr), "rope: q_norm and k_norm go together");
  const dim3 grid(a.tokens, (a.num_heads + 2 * a.num_kv_heads + kWarps - 1) / kWarps);
  return launch_kernel(qk_norm_rope_kv_kernel, grid, kWarps * 32, 0, stream, a);
}
