// Ceilings for the benchmarks: device copy bandwidth and cuBLAS bf16 GEMM rate, measured with
// events after a warm-up, on non-zero data (zeros can run faster than real data).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "cuda_check.h"

namespace {

// Deterministic pseudo-random bf16 in [-1, 1).
__global__ void fill_random_bf16(__nv_bfloat16 *p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ salt;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    p[i] = __float2bfloat16((float)(x & 0xffff) / 32768.f - 1.f);
  }
}

// Frees device buffers, events and the stream when the measurement returns, on every path.
struct BenchResources {
  void *buf[3] = {nullptr, nullptr, nullptr};
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  ~BenchResources() {
    for (void *p : buf) cudaFree(p);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }
};

lp_status make_timing(BenchResources &r) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&r.start));
  CUDA_CHECK(cudaEventCreate(&r.stop));
  return LP_OK;
}

}  // namespace

extern "C" lp_status lp_bench_copy_bandwidth(int64_t bytes, int32_t iters, double *out_bytes_per_s) {
  LP_REQUIRE(bytes >= 16 && iters > 0 && out_bytes_per_s, "bad arguments bytes=%lld iters=%d", (long long)bytes,
             iters);
  BenchResources r;
  LP_TRY(make_timing(r));
  CUDA_CHECK(cudaMalloc(&r.buf[0], (size_t)bytes));
  CUDA_CHECK(cudaMalloc(&r.buf[1], (size_t)bytes));
  fill_random_bf16<<<1024, 256, 0, r.stream>>>((__nv_bfloat16 *)r.buf[0], (size_t)bytes / 2, 1u);
  CUDA_CHECK_LAUNCH();
  for (int i = 0; i < 2; i++)
    CUDA_CHECK(cudaMemcpyAsync(r.buf[1], r.buf[0], (size_t)bytes, cudaMemcpyDeviceToDevice, r.stream));
  CUDA_CHECK(cudaEventRecord(r.start, r.stream));
  for (int i = 0; i < iters; i++)
    CUDA_CHECK(cudaMemcpyAsync(r.buf[1], r.buf[0], (size_t)bytes, cudaMemcpyDeviceToDevice, r.stream));
  CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
  CUDA_CHECK(cudaEventSynchronize(r.stop));
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
  *out_bytes_per_s = 2.0 * (double)bytes * iters / (ms * 1e-3);
  return LP_OK;
}

extern "C" lp_status lp_bench_gemm_bf16(int32_t m, int32_t n, int32_t k, int32_t iters, float *out_flops_per_s) {
  LP_REQUIRE(m > 0 && n > 0 && k > 0 && iters > 0 && out_flops_per_s, "bad arguments m=%d n=%d k=%d iters=%d", m, n,
             k, iters);
  BenchResources r;
  LP_TRY(make_timing(r));
  const size_t sa = (size_t)m * k, sb = (size_t)k * n, sc = (size_t)m * n;
  CUDA_CHECK(cudaMalloc(&r.buf[0], sa * 2));
  CUDA_CHECK(cudaMalloc(&r.buf[1], sb * 2));
  CUDA_CHECK(cudaMalloc(&r.buf[2], sc * 2));
  fill_random_bf16<<<1024, 256, 0, r.stream>>>((__nv_bfloat16 *)r.buf[0], sa, 7u);
  fill_random_bf16<<<1024, 256, 0, r.stream>>>((__nv_bfloat16 *)r.buf[1], sb, 11u);
  CUDA_CHECK_LAUNCH();
  CUBLAS_CHECK(cublasCreate(&r.cublas));
  CUBLAS_CHECK(cublasSetStream(r.cublas, r.stream));
  const float alpha = 1.f, beta = 0.f;
  auto gemm = [&]() {
    return cublasGemmEx(r.cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, r.buf[0], CUDA_R_16BF, m, r.buf[1],
                        CUDA_R_16BF, k, &beta, r.buf[2], CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  for (int i = 0; i < 3; i++) CUBLAS_CHECK(gemm());
  CUDA_CHECK(cudaEventRecord(r.start, r.stream));
  for (int i = 0; i < iters; i++) CUBLAS_CHECK(gemm());
  CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
  CUDA_CHECK(cudaEventSynchronize(r.stop));
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
  *out_flops_per_s = (float)(2.0 * m * n * (double)k * iters / (ms * 1e-3));
  return LP_OK;
}
