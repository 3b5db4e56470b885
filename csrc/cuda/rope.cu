// Per-token attention prologue in one kernel: Qwen3's per-head q/k RMSNorm, rotary embedding in
// Hugging Face's rotate_half layout (element i pairs with i + head_dim/2), and the write of this
// step's K and V into the paged cache at slot_mapping[t]. For head sizes of 64, 128 and 256 a group
// of head_dim / 8 lanes takes one head row with one 16-byte load per lane (the prologue the decode
// attention kernel fuses); other sizes take the general kernel, one warp per head.
#include <math.h>

#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"
#include "rope_rotate.cuh"

namespace {

const int kWarps = 4;  // general kernel: one warp per head; grid (token, head group)
const int kVecThreads = 256;  // head-size-specific kernel: 256 / (head_dim / 8) head rows a block

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

// One head row per group of LANES = D / 8 lanes: the rows of all tokens and heads (q, k, v) are
// numbered token-major and taken in order, so consecutive groups read consecutive memory.
template <int D>
__global__ __launch_bounds__(kVecThreads) void qk_norm_rope_kv_vec_kernel(RopeArgs a) {
  constexpr int LANES = D / 8, GROUPS = kVecThreads / LANES;
  pdl_trigger();
  const int lane = threadIdx.x & 31, li = lane % LANES;
  const unsigned group_lanes = LANES == 32 ? 0xffffffffu : ((1u << LANES) - 1u) << (lane / LANES * LANES);
  const int H = a.num_heads, KV = a.num_kv_heads, units = H + 2 * KV, kv_dim = KV * D;
  const long row = (long)blockIdx.x * GROUPS + threadIdx.x / LANES;
  const int t = (int)(row / units), u = (int)(row % units);
  const bool is_q = u < H, is_v = u >= H + KV;
  // The norm weights are constants: read before the wait.
  const bool norm = a.q_norm != nullptr;
  const uint4 w = norm && !is_v ? *reinterpret_cast<const uint4 *>((is_q ? a.q_norm : a.k_norm) + li * 8)
                                : make_uint4(0, 0, 0, 0);
  pdl_wait();
  if (row >= (long)a.tokens * units) return;
  bf16 *src = a.qkv + (size_t)row * D + li * 8;  // rows of H + 2 KV heads: row t * units + u
  const int slot = a.slots[t];
  if (!is_q && slot < 0) return;  // a padding token's K and V are not cached (the whole group agrees)
  const uint4 raw = *reinterpret_cast<const uint4 *>(src);
  if (is_v) {
    *reinterpret_cast<uint4 *>(a.v_cache + (size_t)slot * kv_dim + (size_t)(u - H - KV) * D + li * 8) = raw;
    return;
  }
  float2 c[8];
  load_rope_pairs<LANES>(a.cos_sin, t, li, c);
  float x[8];
  bf16x8_to_f32(raw, x);
  head_norm_rope<LANES>(x, li, norm, w, a.eps, c, group_lanes);
  bf16 *dst = is_q ? src : a.k_cache + (size_t)slot * kv_dim + (size_t)(u - H) * D + li * 8;
  *reinterpret_cast<uint4 *>(dst) = f32_to_bf16x8(x);
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
  const long rows = (long)a.tokens * (a.num_heads + 2 * a.num_kv_heads);
  auto vec = [&](auto kernel, int lanes) {
    const long groups = kVecThreads / lanes;
    return launch_kernel(kernel, (unsigned)((rows + groups - 1) / groups), kVecThreads, 0, stream, a);
  };
  if (a.head_dim == 64) return vec(qk_norm_rope_kv_vec_kernel<64>, 8);
  if (a.head_dim == 128) return vec(qk_norm_rope_kv_vec_kernel<128>, 16);
  if (a.head_dim == 256) return vec(qk_norm_rope_kv_vec_kernel<256>, 32);
  const dim3 grid(a.tokens, (a.num_heads + 2 * a.num_kv_heads + kWarps - 1) / kWarps);
  return launch_kernel(qk_norm_rope_kv_kernel, grid, kWarps * 32, 0, stream, a);
}
