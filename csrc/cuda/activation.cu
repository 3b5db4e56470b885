// SwiGLU activation: act = silu(gate) * up over the fused gate;up GEMM output.
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

// One thread per 8 outputs (16-byte loads and stores); inter % 8 == 0.
__global__ void silu_mul_vec_kernel(const bf16 *gate_up, int inter, size_t total8, bf16 *out) {
  pdl_trigger();
  pdl_wait();
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total8) return;
  const size_t per_row = (size_t)inter / 8, t = i / per_row, c = i % per_row;
  const bf16 *row = gate_up + t * 2 * inter;
  float g[8], u[8], o[8];
  bf16x8_to_f32(reinterpret_cast<const uint4 *>(row)[c], g);
  bf16x8_to_f32(reinterpret_cast<const uint4 *>(row + inter)[c], u);
#pragma unroll
  for (int j = 0; j < 8; j++) o[j] = g[j] / (1.f + __expf(-g[j])) * u[j];
  reinterpret_cast<uint4 *>(out + t * inter)[c] = f32_to_bf16x8(o);
}

__global__ void silu_mul_kernel(const bf16 *gate_up, int inter, size_t total, bf16 *out) {
  pdl_trigger();
  pdl_wait();
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const size_t t = i / inter, c = i % inter;
  const float g = __bfloat162float(gate_up[t * 2 * inter + c]);
  const float u = __bfloat162float(gate_up[t * 2 * inter + inter + c]);
  out[i] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
}

}  // namespace

lp_status launch_silu_mul(const bf16 *gate_up, int tokens, int inter, bf16 *out, cudaStream_t stream) {
  LP_REQUIRE(tokens > 0 && inter > 0, "silu_mul: bad shape tokens=%d inter=%d", tokens, inter);
  const int threads = 256;
  if (inter % 8 == 0) {
    const size_t total8 = (size_t)tokens * inter / 8;
    LP_TRY(launch_kernel(silu_mul_vec_kernel, (unsigned)((total8 + threads - 1) / threads), threads, 0, stream,
                         gate_up, inter, total8, out));
  } else {
    const size_t total = (size_t)tokens * inter;
    LP_TRY(launch_kernel(silu_mul_kernel, (unsigned)((total + threads - 1) / threads), threads, 0, stream, gate_up,
                         inter, total, out));
  }
  return LP_OK;
}
