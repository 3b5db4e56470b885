// lp_kv_pack / lp_kv_unpack: blocks to and from a device buffer in the packed layout, on the
// device's transfer streams; and the segment rule both ends of a transfer share.
#include "kv_chunk_copy.cuh"
#include "transfer_context.cuh"

namespace {

lp_status pack_or_unpack(const lp_kv *kv, const int32_t *ids, int n, const lp_dev_buffer *buf, bool unpack,
                         lp_xfer_job **out_job) {
  LP_TRY(check_block_ids(kv, ids, n, unpack ? "destination" : "source"));
  LP_TRY(dev_buffer_check(buf));
  LP_REQUIRE(buf->device == kv->device, "buffer on device %d, KV cache on device %d", buf->device, kv->device);
  const int64_t chunks = (int64_t)n * 2 * kv->num_layers;
  LP_REQUIRE((size_t)chunks * kv_chunk_bytes(kv) <= buf->bytes, "%d blocks need %zu bytes; the buffer has %zu", n,
             (size_t)chunks * kv_chunk_bytes(kv), buf->bytes);
  TransferContext *ctx;
  LP_TRY(transfer_context(kv->device, &ctx));
  std::lock_guard<std::mutex> lock(ctx->mu);
  CUDA_CHECK(cudaSetDevice(kv->device));
  cudaStream_t stream = unpack ? ctx->unpack : ctx->pack;
  if (unpack) {
    LP_TRY(copy_chunks(packed_end(buf->ptr), kv_end(kv), nullptr, ids, n, kv_chunk_vec(kv), 0, chunks, stream));
  } else {
    LP_TRY(copy_chunks(kv_end(kv), packed_end(buf->ptr), ids, nullptr, n, kv_chunk_vec(kv), 0, chunks, stream));
  }
  lp_xfer_job *job;
  LP_TRY(job_create(nullptr, &job));
  const lp_status st = job_record(job, kv->device, stream);
  if (st != LP_OK) {
    job_free(job);
    return st;
  }
  return job_finish(job, out_job);
}

}  // namespace

extern "C" lp_status lp_kv_pack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf,
                                lp_xfer_job **out_job) {
  return pack_or_unpack(kv, block_ids, n, buf, false, out_job);
}

extern "C" lp_status lp_kv_unpack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf,
                                  lp_xfer_job **out_job) {
  return pack_or_unpack(kv, block_ids, n, buf, true, out_job);
}

extern "C" lp_status lp_kv_segment_bytes(lp_kv *kv, int32_t n, int64_t segment_bytes, int64_t *out_bytes) {
  LP_REQUIRE(kv && out_bytes, "null kv or out_bytes");
  LP_REQUIRE(n > 0 && segment_bytes >= 0, "n=%d must be positive and segment_bytes=%lld >= 0", n,
             (long long)segment_bytes);
  const int64_t cb = (int64_t)kv_chunk_bytes(kv);
  *out_bytes = lp_kv_segment_chunks((int64_t)n * 2 * kv->num_layers, cb, segment_bytes) * cb;
  return LP_OK;
}
