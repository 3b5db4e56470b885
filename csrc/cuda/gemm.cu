// Linear layers through cuBLAS: bf16 weights and activations, fp32 accumulation. Weights are
// Hugging Face [out, in] row-major, i.e. column-major [in, out]; activations are row-major
// [tokens, in]. In column-major terms Y^T[out, tokens] = W^T . X^T, the "TN" GEMM.
#include "ops.cuh"

lp_status gemm_bf16(cublasHandle_t handle, int n_out, int tokens, int k, const bf16 *w,
                    const bf16 *x, void *y, bool y_f32, float beta) {
  LP_REQUIRE(n_out > 0 && tokens > 0 && k > 0, "gemm: bad shape n_out=%d tokens=%d k=%d", n_out, tokens, k);
  LP_REQUIRE(w && x && y, "gemm: null operand");
  const float alpha = 1.f;
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n_out, tokens, k, &alpha, w, CUDA_R_16BF, k,
                            x, CUDA_R_16BF, k, &beta, y, y_f32 ? CUDA_R_32F : CUDA_R_16BF, n_out,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return LP_OK;
}
