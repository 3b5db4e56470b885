/* Transfer calls of the CPU build. Everything completes on return, so no job is ever pending
 * (job NULL). Two caches in one process copy with memcpy; NCCL and CUDA IPC do not exist here:
 * CPU workers exchange packed bytes over their own socket (lib/local/kv_peer_channel.ts). */
#include <string.h>

#include "cpu_transfer.h"

#define NO_GPU_TRANSFER "the CPU backend has no %s; CPU workers move KV over the peer socket path"

lp_status lp_xfer_query(lp_xfer_job *job, int32_t *out_done) {
  LP_REQUIRE(out_done, "out_done is NULL");
  LP_REQUIRE(!job, "job %p does not exist (CPU transfers complete on return, job NULL)", (void *)job);
  *out_done = 1;
  return LP_OK;
}

lp_status lp_xfer_wait(lp_xfer_job *job, int32_t timeout_ms) {
  LP_REQUIRE(timeout_ms >= 0, "timeout_ms=%d must be >= 0", timeout_ms);
  LP_REQUIRE(!job, "job %p does not exist (CPU transfers complete on return, job NULL)", (void *)job);
  return LP_OK;
}

lp_status lp_xfer_release(lp_xfer_job *job) {
  LP_REQUIRE(!job, "job %p does not exist (CPU transfers complete on return, job NULL)", (void *)job);
  return LP_OK;
}

lp_status lp_kv_peer_copy(lp_kv *src, lp_kv *dst, const int32_t *src_ids, const int32_t *dst_ids, int32_t n,
                          int32_t mode, int64_t segment_bytes, lp_xfer_job **out_job) {
  LP_TRY(cpu_kv_check(src));
  LP_TRY(cpu_kv_check(dst));
  LP_REQUIRE(mode >= LP_PEER_COPY_ENGINE && mode <= LP_PEER_COPY_ENGINE_DIRECT, "unknown peer copy mode %d", mode);
  LP_REQUIRE(segment_bytes >= 0, "segment_bytes=%lld must be >= 0", (long long)segment_bytes);
  LP_REQUIRE(n >= 1 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  LP_REQUIRE(src_ids && dst_ids, "null block ids (source %p, destination %p)", (const void *)src_ids,
             (const void *)dst_ids);
  LP_REQUIRE(src->num_layers == dst->num_layers && src->block_floats == dst->block_floats,
             "caches differ in shape (%d layers x %lld floats per chunk vs %d x %lld)", src->num_layers,
             (long long)src->block_floats, dst->num_layers, (long long)dst->block_floats);
  LP_TRY(cpu_kv_check_ids(src, src_ids, n, "source "));
  LP_TRY(cpu_kv_check_ids(dst, dst_ids, n, "destination "));
  const size_t bytes = (size_t)src->block_floats * sizeof(float);
  for (int64_t ls = 0; ls < 2 * (int64_t)src->num_layers; ls++)
    for (int32_t i = 0; i < n; i++) memmove(cpu_kv_chunk(dst, ls, dst_ids[i]), cpu_kv_chunk(src, ls, src_ids[i]), bytes);
  if (out_job) *out_job = NULL;
  return LP_OK;
}

lp_status lp_kv_ipc_handle(lp_kv *kv, void *out_handle64) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "CUDA IPC handles");
}

lp_status lp_kv_ipc_open(const void *handle64, lp_kv *like_kv, int32_t num_blocks, lp_kv **out_view) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "CUDA IPC handles");
}

lp_status lp_kv_ipc_close(lp_kv *view) {
  if (!view) return LP_OK;
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "CUDA IPC views");
}

lp_status lp_nccl_version(int32_t *out_version) { return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL"); }

lp_status lp_nccl_unique_id(void *out_id128) { return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL"); }

lp_status lp_nccl_pair_create(const void *unique_id128, int32_t nranks, int32_t rank, int32_t device,
                              int32_t nchannels, int64_t slot_bytes, int32_t timeout_ms, lp_nccl_pair **out_pair) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL communicators");
}

lp_status lp_nccl_pair_create_local(int32_t device0, int32_t device1, int32_t nchannels, int64_t slot_bytes,
                                    int32_t timeout_ms, lp_nccl_pair **out_pair) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL communicators");
}

lp_status lp_nccl_pair_abort(lp_nccl_pair *pair) { return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL communicators"); }

lp_status lp_nccl_pair_destroy(lp_nccl_pair *pair) {
  if (!pair) return LP_OK;
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL communicators");
}

lp_status lp_kv_send(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                     int64_t segment_bytes, lp_xfer_job **out_job) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL send");
}

lp_status lp_kv_recv(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                     int64_t segment_bytes, lp_xfer_job **out_job) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL receive");
}

lp_status lp_kv_transfer_local(lp_nccl_pair *pair, int32_t src_rank, lp_kv *src_kv, const int32_t *src_ids,
                               lp_kv *dst_kv, const int32_t *dst_ids, int32_t n, int64_t segment_bytes,
                               lp_xfer_job **out_job) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL pairs");
}

lp_status lp_nccl_local_sendrecv(lp_nccl_pair *pair, int32_t src_rank, lp_dev_buffer *src_buf,
                                 lp_dev_buffer *dst_buf, int64_t bytes, lp_xfer_job **out_job) {
  return LP_FAIL(LP_ERR_UNSUPPORTED, NO_GPU_TRANSFER, "NCCL pairs");
}
