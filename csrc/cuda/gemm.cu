// Linear layers through cuBLAS: bf16 weights and activations, fp32 accumulation. Weights are
// Hugging Face [out, in] row-major, i.e. column-major [in, out]; activations are row-major
// [tokens, in]. In column-major terms Y^T[out, tokens] = W^T . X^T, the "TN" GEMM.
#include "ops.cuh"

// cuBLAS chooses a kernel per problem shape, and under lazy module loading (CUDA's default) the
// first launch of a kernel loads it, which waits for the work already on the device: a step that
// met a new token count held its host thread in the launch for about a whole step (8-28 ms seen),
// so transfer phases waited too. GEMMs therefore run at a few row counts only, all of them warmed
// at finalize (gemm_warmup.cu): the next power of two up to 8 rows, the next multiple of 16 up to
// 256 (every decode graph's batch pads by less than 16), then the next multiple of 256, at most
// `cap`. The padding costs at most 255 rows of a step that has more than 256.
int gemm_rows(int rows, int cap) {
  int r = 1;
  if (rows <= 8) {
    while (r < rows) r <<= 1;
  } else {
    const int unit = rows <= 256 ? 16 : 256;
    r = (rows + unit - 1) / unit * unit;
  }
  return r < cap ? r : cap;
}

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
