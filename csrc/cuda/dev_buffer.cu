// Device buffers for packed payloads and raw-link baselines.
#include "transfer_context.cuh"

namespace {

constexpr uint64_t kBufferMagic = 0x4c5044455642ULL;  // "LPDEVB"

lp_status check_range(const lp_dev_buffer *b, int64_t offset, int64_t bytes, const void *host) {
  LP_REQUIRE(offset >= 0 && bytes >= 0 && (size_t)offset <= b->bytes && (size_t)bytes <= b->bytes - (size_t)offset,
             "range [%lld, %lld) outside the %zu-byte buffer", (long long)offset, (long long)(offset + bytes),
             b->bytes);
  LP_REQUIRE(host || bytes == 0, "host pointer is NULL");
  return LP_OK;
}

}  // namespace

lp_status dev_buffer_check(const lp_dev_buffer *b) {
  LP_REQUIRE(b && b->magic == kBufferMagic, "handle %p is not a live device buffer", (const void *)b);
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_alloc(int32_t device, int64_t bytes, lp_dev_buffer **out_buf) {
  LP_REQUIRE(out_buf, "out_buf is NULL");
  LP_REQUIRE(bytes > 0, "bytes=%lld must be positive", (long long)bytes);
  CUDA_CHECK(cudaSetDevice(device));
  void *ptr = nullptr;
  const cudaError_t e = cudaMalloc(&ptr, (size_t)bytes);
  if (e != cudaSuccess)
    return LP_FAIL(LP_ERR_OOM, "device buffer of %lld bytes on device %d: %s", (long long)bytes, device,
                   cudaGetErrorString(e));
  lp_dev_buffer *b = new lp_dev_buffer{kBufferMagic, device, ptr, (size_t)bytes};
  *out_buf = b;
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_free(lp_dev_buffer *b) {
  if (!b) return LP_OK;
  LP_TRY(dev_buffer_check(b));
  b->magic = 0;
  cudaSetDevice(b->device);
  cudaFree(b->ptr);  // cudaFree waits for work still using the buffer
  delete b;
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_bytes(lp_dev_buffer *b, int64_t *out_bytes) {
  LP_TRY(dev_buffer_check(b));
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = (int64_t)b->bytes;
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_write(lp_dev_buffer *b, int64_t offset, const void *src, int64_t bytes) {
  LP_TRY(dev_buffer_check(b));
  LP_TRY(check_range(b, offset, bytes, src));
  if (bytes == 0) return LP_OK;
  CUDA_CHECK(cudaSetDevice(b->device));
  CUDA_CHECK(cudaMemcpy((char *)b->ptr + offset, src, (size_t)bytes, cudaMemcpyHostToDevice));
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_read(lp_dev_buffer *b, int64_t offset, void *dst, int64_t bytes) {
  LP_TRY(dev_buffer_check(b));
  LP_TRY(check_range(b, offset, bytes, dst));
  if (bytes == 0) return LP_OK;
  CUDA_CHECK(cudaSetDevice(b->device));
  CUDA_CHECK(cudaMemcpy(dst, (const char *)b->ptr + offset, (size_t)bytes, cudaMemcpyDeviceToHost));
  return LP_OK;
}

extern "C" lp_status lp_dev_buffer_copy(lp_dev_buffer *dst, lp_dev_buffer *src, int64_t bytes,
                                        lp_xfer_job **out_job) {
  LP_TRY(dev_buffer_check(dst));
  LP_TRY(dev_buffer_check(src));
  LP_REQUIRE(bytes >= 0 && (size_t)bytes <= dst->bytes && (size_t)bytes <= src->bytes,
             "bytes=%lld exceeds the source (%zu) or destination (%zu) buffer", (long long)bytes, src->bytes,
             dst->bytes);
  LP_TRY(enable_peer_access(src->device, dst->device));
  TransferContext *ctx;
  LP_TRY(transfer_context(src->device, &ctx));
  std::lock_guard<std::mutex> lock(ctx->mu);
  CUDA_CHECK(cudaSetDevice(src->device));
  CUDA_CHECK(cudaMemcpyPeerAsync(dst->ptr, dst->device, src->ptr, src->device, (size_t)bytes, ctx->copy));
  lp_xfer_job *job;
  LP_TRY(job_create(nullptr, &job));
  const lp_status st = job_record(job, src->device, ctx->copy);
  if (st != LP_OK) {
    job_free(job);
    return st;
  }
  return job_finish(job, out_job);
}
