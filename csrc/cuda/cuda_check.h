/* Error-recording checks for CUDA, cuBLAS and NCCL calls: record file:line and the library's
 * error string, then return a status (never exit). */
#ifndef LP_CUDA_CHECK_H
#define LP_CUDA_CHECK_H
#include <cuda_runtime.h>

#include "../common/lp_error.h"

#define CUDA_CHECK(expr)                                                                           \
  do {                                                                                             \
    cudaError_t lp_e_ = (expr);                                                                    \
    if (lp_e_ != cudaSuccess)                                                                      \
      return LP_FAIL(LP_ERR_CUDA, "%s: %s (%s)", #expr, cudaGetErrorString(lp_e_),                 \
                     cudaGetErrorName(lp_e_));                                                     \
  } while (0)

/* Checks the most recent kernel launch. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(expr)                                                                         \
  do {                                                                                             \
    cublasStatus_t lp_s_ = (expr);                                                                 \
    if (lp_s_ != CUBLAS_STATUS_SUCCESS)                                                            \
      return LP_FAIL(LP_ERR_CUBLAS, "%s: %s", #expr, cublasGetStatusString(lp_s_));                \
  } while (0)

#define NCCL_CHECK(expr)                                                                           \
  do {                                                                                             \
    ncclResult_t lp_r_ = (expr);                                                                   \
    if (lp_r_ != ncclSuccess)                                                                      \
      return LP_FAIL(LP_ERR_NCCL, "%s: %s", #expr, ncclGetErrorString(lp_r_));                     \
  } while (0)

#endif
