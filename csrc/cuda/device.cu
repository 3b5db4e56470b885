// Device queries of the CUDA build.
#include "cuda_check.h"

extern "C" int32_t lp_backend_kind(void) { return 1; }

extern "C" lp_status lp_device_count(int32_t *out_count) {
  LP_REQUIRE(out_count, "out_count is NULL");
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  *out_count = n;
  return LP_OK;
}

extern "C" lp_status lp_set_device(int32_t device) {
  CUDA_CHECK(cudaSetDevice(device));
  return LP_OK;
}

extern "C" lp_status lp_device_memory(int64_t *out_free_total) {
  LP_REQUIRE(out_free_total, "out_free_total is NULL");
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  out_free_total[0] = (int64_t)free_b;
  out_free_total[1] = (int64_t)total_b;
  return LP_OK;
}

extern "C" lp_status lp_device_synchronize(void) {
  CUDA_CHECK(cudaDeviceSynchronize());
  return LP_OK;
}
