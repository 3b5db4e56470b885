// lp_kv_peer_copy: blocks of one KV cache into blocks of another on the same or another device
// of this process (or a CUDA IPC view of another process's cache), three ways:
// - copy engine: pack -> cudaMemcpyPeerAsync -> unpack per segment, pipelined through the two
//   devices' staging rings (pack of segment k+1 overlaps the copy of k and the unpack of k-1);
// - kernel: one launch on the source device stores straight into the destination blocks;
// - copy engine direct: no kernels, one strided 2-D copy per block (2L rows of one chunk); for a
//   cache past the copy engine's pitch limit, the kernel.
#include <mutex>

#include "kv_chunk_copy.cuh"
#include "transfer_context.cuh"

namespace {

lp_status copy_engine_pipelined(const lp_kv *src, const lp_kv *dst, const int32_t *src_ids,
                                const int32_t *dst_ids, int n, int64_t segment_bytes, TransferContext *a,
                                TransferContext *b, lp_xfer_job *job) {
  const size_t vec = kv_chunk_vec(src), cb = kv_chunk_bytes(src);
  const int64_t total = (int64_t)n * 2 * src->num_layers;
  const int64_t seg = lp_kv_segment_chunks(total, (int64_t)cb, segment_bytes);
  LP_TRY(ring_reserve(&a->ring, (size_t)seg * cb));
  LP_TRY(ring_reserve(&b->ring, (size_t)seg * cb));
  for (int64_t c0 = 0; c0 < total; c0 += seg) {
    const int64_t k = total - c0 < seg ? total - c0 : seg;
    int sa, sb;
    CUDA_CHECK(cudaSetDevice(a->device));
    LP_TRY(ring_acquire(&a->ring, a->pack, &sa));
    LP_TRY(copy_chunks(kv_end(src), packed_end(a->ring.slot[sa]), src_ids, nullptr, n, vec, c0, k, a->pack));
    CUDA_CHECK(cudaEventRecord(a->ring.ready_ev[sa], a->pack));
    CUDA_CHECK(cudaStreamWaitEvent(a->copy, a->ring.ready_ev[sa], 0));
    LP_TRY(ring_acquire(&b->ring, a->copy, &sb));
    CUDA_CHECK(cudaMemcpyPeerAsync(b->ring.slot[sb], b->device, a->ring.slot[sa], a->device, (size_t)k * cb, a->copy));
    CUDA_CHECK(cudaEventRecord(a->ring.free_ev[sa], a->copy));
    CUDA_CHECK(cudaEventRecord(a->link_ev[sa], a->copy));
    CUDA_CHECK(cudaSetDevice(b->device));
    CUDA_CHECK(cudaStreamWaitEvent(b->unpack, a->link_ev[sa], 0));
    LP_TRY(copy_chunks(packed_end(b->ring.slot[sb]), kv_end(dst), nullptr, dst_ids, n, vec, c0, k, b->unpack));
    CUDA_CHECK(cudaEventRecord(b->ring.free_ev[sb], b->unpack));
  }
  return job_record(job, b->device, b->unpack);
}

// One launch on the source device that stores every chunk of the blocks straight into the
// destination (a peer mapping or an IPC view), on `stream`.
lp_status kernel_copy(const lp_kv *src, const lp_kv *dst, const int32_t *src_ids, const int32_t *dst_ids,
                      int n, cudaStream_t stream, int device, lp_xfer_job *job) {
  LP_TRY(copy_chunks(kv_end(src), kv_end(dst), src_ids, dst_ids, n, kv_chunk_vec(src), 0,
                     (int64_t)n * 2 * src->num_layers, stream));
  return job_record(job, device, stream);
}

lp_status copy_engine_direct(const lp_kv *src, const lp_kv *dst, const int32_t *src_ids,
                             const int32_t *dst_ids, int n, TransferContext *a, lp_xfer_job *job) {
  const size_t cb = kv_chunk_bytes(src);
  const size_t spitch = (size_t)src->num_blocks * cb, dpitch = (size_t)dst->num_blocks * cb;
  const int rows = 2 * src->num_layers;
  int max_pitch = 0;
  CUDA_CHECK(cudaSetDevice(a->device));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, a->device));
  // A cache over the copy engine's pitch limit (2 GiB: a few thousand 0.5 MiB chunks per layer
  // row) would need one copy call per layer and side, 2L per block, whose host-side cost (about
  // 0.25 ms per block at 28 layers) dwarfs the transfer itself; the copy kernel writes through the
  // same peer mapping in one launch instead.
  if (spitch > (size_t)max_pitch || dpitch > (size_t)max_pitch)
    return kernel_copy(src, dst, src_ids, dst_ids, n, a->copy, a->device, job);
  for (int i = 0; i < n; i++) {
    const char *s = (const char *)src->data + (size_t)src_ids[i] * cb;
    char *d = (char *)dst->data + (size_t)dst_ids[i] * cb;
    CUDA_CHECK(cudaMemcpy2DAsync(d, dpitch, s, spitch, cb, rows, cudaMemcpyDefault, a->copy));
  }
  return job_record(job, a->device, a->copy);
}

lp_status enqueue(const lp_kv *src, const lp_kv *dst, const int32_t *src_ids, const int32_t *dst_ids, int n,
                  int mode, int64_t segment_bytes, lp_xfer_job *job) {
  TransferContext *a, *b;
  LP_TRY(transfer_context(src->device, &a));
  LP_TRY(transfer_context(dst->device, &b));
  // Both devices' contexts, locked in device order so two opposite copies cannot deadlock.
  std::unique_lock<std::mutex> first(a->device <= b->device ? a->mu : b->mu), second;
  if (a != b) second = std::unique_lock<std::mutex>(a->device <= b->device ? b->mu : a->mu);
  if (mode == LP_PEER_KERNEL) {
    CUDA_CHECK(cudaSetDevice(a->device));
    return kernel_copy(src, dst, src_ids, dst_ids, n, a->pack, a->device, job);
  }
  if (mode == LP_PEER_COPY_ENGINE_DIRECT) return copy_engine_direct(src, dst, src_ids, dst_ids, n, a, job);
  return copy_engine_pipelined(src, dst, src_ids, dst_ids, n, segment_bytes, a, b, job);
}

}  // namespace

extern "C" lp_status lp_kv_peer_copy(lp_kv *src, lp_kv *dst, const int32_t *src_ids, const int32_t *dst_ids,
                                     int32_t n, int32_t mode, int64_t segment_bytes, lp_xfer_job **out_job) {
  LP_TRY(check_block_ids(src, src_ids, n, "source"));
  LP_TRY(check_block_ids(dst, dst_ids, n, "destination"));
  LP_REQUIRE(mode >= LP_PEER_COPY_ENGINE && mode <= LP_PEER_COPY_ENGINE_DIRECT, "unknown peer copy mode %d", mode);
  LP_REQUIRE(segment_bytes >= 0, "segment_bytes=%lld must be >= 0", (long long)segment_bytes);
  LP_REQUIRE(src->num_layers == dst->num_layers && src->chunk_elems == dst->chunk_elems,
             "caches differ in shape (%d layers x %zu elements per chunk vs %d x %zu)", src->num_layers,
             src->chunk_elems, dst->num_layers, dst->chunk_elems);
  LP_TRY(enable_peer_access(src->device, dst->device));
  LP_TRY(enable_peer_access(dst->device, src->device));
  lp_xfer_job *job;
  LP_TRY(job_create(nullptr, &job));
  const lp_status st = enqueue(src, dst, src_ids, dst_ids, n, mode, segment_bytes, job);
  if (st != LP_OK) {
    job_free(job);
    return st;
  }
  return job_finish(job, out_job);
}
