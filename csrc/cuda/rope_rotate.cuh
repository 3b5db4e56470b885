// The rotary pair rotation and the per-head norm + rotation (with its loads of the rope table)
// shared by the per-token prologue kernel (rope.cu) and the decode attention kernel that fuses the
// prologue for pure decode steps, with the arithmetic pinned (explicit fma / mul) so both round
// identically; and the rope table's entries, which rope.cu or the step's first GEMV (gemv.cu)
// computes.
#ifndef LP_CUDA_ROPE_ROTATE_CUH
#define LP_CUDA_ROPE_ROTATE_CUH
#include "device_util.cuh"

// Entry i of the table of (cos, sin)(positions[t] * inv_freq[j]), i = t * half + j: accurate
// sincosf (angles reach the position itself).
__device__ __forceinline__ float2 rope_table_entry(const int32_t *positions, const float *inv_freq, int half,
                                                   size_t i) {
  float s, c;
  sincosf((float)positions[i / half] * inv_freq[i % half], &s, &c);
  return make_float2(c, s);
}

// transformers' rotate_half: (x1, x2) at (i, i + head_dim/2) -> (x1 c - x2 s, x2 c + x1 s).
__device__ __forceinline__ float2 rope_rotate(float x1, float x2, float2 cos_sin) {
  return make_float2(__fmaf_rn(x1, cos_sin.x, -__fmul_rn(x2, cos_sin.y)),
                     __fmaf_rn(x2, cos_sin.x, __fmul_rn(x1, cos_sin.y)));
}

// The (cos, sin) of the 8 rotation pairs lane li of a LANES-lane group holds in head_norm_rope,
// for token t of the rope table: pairs [8 (li % (LANES / 2)), + 8), four 16-byte loads.
template <int LANES>
__device__ __forceinline__ void load_rope_pairs(const float2 *cos_sin, int t, int li, float2 (&c)[8]) {
  const float4 *cs4 = reinterpret_cast<const float4 *>(cos_sin + (size_t)t * (LANES * 4) + (li % (LANES / 2)) * 8);
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const float4 v = cs4[e];
    c[2 * e] = make_float2(v.x, v.y), c[2 * e + 1] = make_float2(v.z, v.w);
  }
}

// The attention prologue for one head: lane li of a LANES-lane group holds elements
// [8 li, 8 li + 8). RMS-normalizes them (times w, rounded to bf16) when `norm`, then rotates each
// with its rotate_half partner (lane li ^ LANES/2 holds it) and rounds to bf16. `w`: this lane's
// 8 norm weights, used when `norm`; `c`: the (cos, sin) of its 8 rotation pairs. `lanes`: the
// mask of the lanes that run this call together (at least this lane's group), for the shuffles.
template <int LANES>
__device__ __forceinline__ void head_norm_rope(float (&x)[8], int li, bool norm, const uint4 &w, float eps,
                                               const float2 (&c)[8], unsigned lanes) {
  constexpr int HALF_LANES = LANES / 2;
  if (norm) {
    float wf[8];
    bf16x8_to_f32(w, wf);
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) ss += x[e] * x[e];
#pragma unroll
    for (int o = HALF_LANES; o > 0; o >>= 1) ss += __shfl_xor_sync(lanes, ss, o);
    const float inv = rsqrtf(ss / (float)(LANES * 8) + eps);
#pragma unroll
    for (int e = 0; e < 8; e++) x[e] = round_bf16(x[e] * inv * wf[e]);
  }
  const bool first = li < HALF_LANES;
  float partner[8];
#pragma unroll
  for (int e = 0; e < 8; e++) partner[e] = __shfl_xor_sync(lanes, x[e], HALF_LANES);
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const float2 r = first ? rope_rotate(x[e], partner[e], c[e]) : rope_rotate(partner[e], x[e], c[e]);
    x[e] = round_bf16(first ? r.x : r.y);
  }
}

#endif
