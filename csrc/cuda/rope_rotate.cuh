// The rotary pair rotation shared by the per-token prologue kernel (rope.cu) and the decode
// attention kernel that fuses the prologue for pure decode steps, with the arithmetic pinned
// (explicit fma / mul) so both round identically.
#ifndef LP_CUDA_ROPE_ROTATE_CUH
#define LP_CUDA_ROPE_ROTATE_CUH

// transformers' rotate_half: (x1, x2) at (i, i + head_dim/2) -> (x1 c - x2 s, x2 c + x1 s).
__device__ __forceinline__ float2 rope_rotate(float x1, float x2, float2 cos_sin) {
  return make_float2(__fmaf_rn(x1, cos_sin.x, -__fmul_rn(x2, cos_sin.y)),
                     __fmaf_rn(x2, cos_sin.x, __fmul_rn(x1, cos_sin.y)));
}

#endif
