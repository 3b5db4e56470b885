// RMSNorm over bf16 rows: one block per row, fp32 accumulation.
#include <cuda_bf16.h>

#include "cuda_check.h"

namespace {

__global__ void rmsnorm_kernel(const __nv_bfloat16 *x, const __nv_bfloat16 *w, __nv_bfloat16 *out,
                               int64_t dim, float eps) {
  const __nv_bfloat16 *xr = x + blockIdx.x * dim;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = __bfloat162float(xr[i]);
    ss += v * v;
  }
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0) partial[0] = ss;
  }
  __syncthreads();
  float inv = rsqrtf(partial[0] / (float)dim + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] = __float2bfloat16(__bfloat162float(xr[i]) * inv * __bfloat162float(w[i]));
}

}  // namespace

// Host-pointer entry point for tests: stages through device memory on the current device.
extern "C" lp_status lp_rmsnorm_bf16(const uint16_t *x, const uint16_t *w, uint16_t *out,
                                     int64_t rows, int64_t dim, float eps) {
  LP_REQUIRE(x && w && out, "null pointer (x=%p w=%p out=%p)", (const void *)x, (const void *)w,
             (void *)out);
  LP_REQUIRE(rows >= 0 && dim > 0, "bad shape rows=%lld dim=%lld", (long long)rows, (long long)dim);
  if (rows == 0) return LP_OK;
  size_t xb = (size_t)(rows * dim) * 2, wb = (size_t)dim * 2;
  void *dx = nullptr, *dw = nullptr, *dout = nullptr;
  lp_status st = LP_OK;
  cudaError_t e = cudaMalloc(&dx, xb);
  if (e == cudaSuccess) e = cudaMalloc(&dw, wb);
  if (e == cudaSuccess) e = cudaMalloc(&dout, xb);
  if (e == cudaSuccess) e = cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dw, w, wb, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    rmsnorm_kernel<<<(unsigned)rows, 256>>>((const __nv_bfloat16 *)dx, (const __nv_bfloat16 *)dw,
                                            (__nv_bfloat16 *)dout, dim, eps);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(out, dout, xb, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    st = LP_FAIL(LP_ERR_CUDA, "rmsnorm rows=%lld dim=%lld: %s", (long long)rows, (long long)dim,
                 cudaGetErrorString(e));
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dout);
  return st;
}
