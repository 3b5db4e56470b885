// Small device helpers shared by the kernels: reductions and 16-byte bf16 vector conversion.
#ifndef LP_CUDA_DEVICE_UTIL_CUH
#define LP_CUDA_DEVICE_UTIL_CUH
#include <cuda_bf16.h>
#include <stdint.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// scratch holds 33 floats; the function syncs before returning and may be called repeatedly.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < nw ? scratch[lane] : 0.f;
    s = warp_sum(s);
    if (lane == 0) scratch[32] = s;
  }
  __syncthreads();
  float r = scratch[32];
  __syncthreads();
  return r;
}

// Eight bf16 packed in 16 bytes, to fp32.
__device__ __forceinline__ void bf16x8_to_f32(const uint4 &v, float *f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Four bf16 packed in 8 bytes, to fp32.
__device__ __forceinline__ float4 bf16x4_to_f32(const uint2 &v) {
  return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u), __uint_as_float(v.y << 16),
                     __uint_as_float(v.y & 0xffff0000u));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ uint4 f32_to_bf16x8(const float *f) {
  return make_uint4(pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]), pack_bf16x2(f[4], f[5]),
                    pack_bf16x2(f[6], f[7]));
}

__device__ __forceinline__ float round_bf16(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

// Streaming 16-byte load that does not pollute L1 (weights are read once per step). L2::128B:
// a miss fills the whole 128-byte line, so the GEMV's two 64-byte halves of a weight row (two
// loads of a lane quad, see gemv.cu) cost one DRAM request; it beat both no hint and L2::256B in
// the native_step benchmark.
__device__ __forceinline__ uint4 ld_stream_16(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

#endif
