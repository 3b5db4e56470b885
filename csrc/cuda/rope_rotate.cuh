// The rotary pair rotation shared by the per-token prologue kernel (rope.cu) and the decode
// attention kernel that fuses the prologue for pure decode steps, with the arithmetic pinned
// (explicit fma / mul) so both round identically; and the rope table's entries, which rope.cu or
// the step's first GEMV (gemv.cu) computes.
#ifndef LP_CUDA_ROPE_ROTATE_CUH
#define LP_CUDA_ROPE_ROTATE_CUH

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

#endif
