// Packed KV transfers on NCCL pairs. Per segment, the sender packs into a send-ring slot on its
// pack stream and ncclSends it on the direction's link stream once an event says it is packed;
// the receiver ncclRecvs into a recv-ring slot and unpacks it on its unpack stream once an event
// says it arrived. Segment k+1 packs while k is on the link and k-1 unpacks.
#ifdef LP_HAVE_NCCL
#include "kv_chunk_copy.cuh"
#include "nccl_pair.cuh"

namespace {

// One transfer's shape as both ends compute it.
struct Plan {
  const lp_kv *kv;
  const int32_t *ids;
  int n;
  int64_t total, seg;  // chunks
  size_t chunk_bytes;
};

lp_status make_plan(const lp_nccl_pair *pair, const PairEndpoint *ep, const lp_kv *kv, const int32_t *ids, int n,
                    int64_t segment_bytes, Plan *p) {
  p->kv = kv;
  LP_TRY(check_block_ids(p->kv, ids, n, "transfer"));
  LP_REQUIRE(p->kv->device == ep->device, "KV cache on device %d, pair rank %d on device %d", p->kv->device, ep->rank,
             ep->device);
  LP_REQUIRE(segment_bytes >= 0, "segment_bytes=%lld must be >= 0", (long long)segment_bytes);
  p->ids = ids;
  p->n = n;
  p->chunk_bytes = kv_chunk_bytes(p->kv);
  p->total = (int64_t)n * 2 * p->kv->num_layers;
  p->seg = lp_kv_segment_chunks(p->total, (int64_t)p->chunk_bytes, segment_bytes);
  LP_REQUIRE((size_t)p->seg * p->chunk_bytes <= ep->send_ring.slot_bytes,
             "segments of %zu bytes exceed the pair's %zu-byte staging slots (create it with a larger slot_bytes)",
             (size_t)p->seg * p->chunk_bytes, ep->send_ring.slot_bytes);
  return LP_OK;
}

int64_t seg_len(const Plan &p, int64_t c0) { return p.total - c0 < p.seg ? p.total - c0 : p.seg; }

// Sender, before the link op: pack segment [c0, c0 + k) into a free slot.
lp_status send_prepare(PairEndpoint *ep, const Plan &p, int64_t c0, int *slot) {
  CUDA_CHECK(cudaSetDevice(ep->device));
  LP_TRY(ring_acquire(&ep->send_ring, ep->pack, slot));
  LP_TRY(copy_chunks(kv_end(p.kv), packed_end(ep->send_ring.slot[*slot]), p.ids, nullptr, p.n, kv_chunk_vec(p.kv), c0,
                     seg_len(p, c0), ep->pack));
  CUDA_CHECK(cudaEventRecord(ep->send_ring.ready_ev[*slot], ep->pack));
  CUDA_CHECK(cudaStreamWaitEvent(ep->link[ep->rank], ep->send_ring.ready_ev[*slot], 0));
  return LP_OK;
}

// Sender, after the link op: the slot is free once the send is done.
lp_status send_finish(PairEndpoint *ep, int slot) {
  CUDA_CHECK(cudaSetDevice(ep->device));
  CUDA_CHECK(cudaEventRecord(ep->send_ring.free_ev[slot], ep->link[ep->rank]));
  return LP_OK;
}

// Receiver, before the link op: a slot whose last unpack is done.
lp_status recv_prepare(PairEndpoint *ep, int *slot) {
  CUDA_CHECK(cudaSetDevice(ep->device));
  return ring_acquire(&ep->recv_ring, ep->link[1 - ep->rank], slot);
}

// Receiver, after the link op: unpack the slot into the destination blocks.
lp_status recv_finish(PairEndpoint *ep, const Plan &p, int64_t c0, int slot) {
  CUDA_CHECK(cudaSetDevice(ep->device));
  CUDA_CHECK(cudaEventRecord(ep->recv_ring.ready_ev[slot], ep->link[1 - ep->rank]));
  CUDA_CHECK(cudaStreamWaitEvent(ep->unpack, ep->recv_ring.ready_ev[slot], 0));
  LP_TRY(copy_chunks(packed_end(ep->recv_ring.slot[slot]), kv_end(p.kv), nullptr, p.ids, p.n, kv_chunk_vec(p.kv), c0,
                     seg_len(p, c0), ep->unpack));
  CUDA_CHECK(cudaEventRecord(ep->recv_ring.free_ev[slot], ep->unpack));
  return LP_OK;
}

// Waits for a non-blocking communicator to finish enqueueing (only needed after ncclInProgress).
lp_status settle(const lp_nccl_pair *pair, ncclResult_t r, ncclComm_t const *comms, int count) {
  if (r == ncclSuccess) return LP_OK;
  if (r != ncclInProgress) return nccl_fail(pair->api, r, "enqueueing an NCCL transfer", __FILE__, __LINE__);
  return nccl_wait_ready(pair->api, comms, count, nccl_deadline(pair->timeout_ms));
}

lp_status send_all(lp_nccl_pair *pair, PairEndpoint *ep, const Plan &p) {
  const NcclApi *api = pair->api;
  const int r = ep->rank;
  for (int64_t c0 = 0; c0 < p.total; c0 += p.seg) {
    int slot;
    LP_TRY(send_prepare(ep, p, c0, &slot));
    LP_TRY(settle(pair, api->Send(ep->send_ring.slot[slot], (size_t)seg_len(p, c0) * p.chunk_bytes, ncclUint8, 1 - r,
                                  ep->comm[r], ep->link[r]),
                  &ep->comm[r], 1));
    LP_TRY(send_finish(ep, slot));
  }
  return LP_OK;
}

lp_status recv_all(lp_nccl_pair *pair, PairEndpoint *ep, const Plan &p) {
  const NcclApi *api = pair->api;
  const int peer = 1 - ep->rank;
  for (int64_t c0 = 0; c0 < p.total; c0 += p.seg) {
    int slot;
    LP_TRY(recv_prepare(ep, &slot));
    LP_TRY(settle(pair, api->Recv(ep->recv_ring.slot[slot], (size_t)seg_len(p, c0) * p.chunk_bytes, ncclUint8, peer,
                                  ep->comm[peer], ep->link[peer]),
                  &ep->comm[peer], 1));
    LP_TRY(recv_finish(ep, p, c0, slot));
  }
  return LP_OK;
}

// One send from endpoint s and its receive at endpoint d (both in this thread) as one NCCL group:
// ungrouped, the first operation could wait for a peer this thread has not reached yet. The
// group is closed even when an operation in it fails.
lp_status grouped_sendrecv(lp_nccl_pair *pair, const void *from, void *to, size_t bytes, PairEndpoint *s,
                           PairEndpoint *d) {
  const NcclApi *api = pair->api;
  const int dir = s->rank;
  ncclComm_t comms[2] = {s->comm[dir], d->comm[dir]};
  const auto ok = [](ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; };
  ncclResult_t r = api->GroupStart();
  if (ok(r) && cudaSetDevice(s->device) == cudaSuccess)
    r = api->Send(from, bytes, ncclUint8, d->rank, comms[0], s->link[dir]);
  if (ok(r) && cudaSetDevice(d->device) == cudaSuccess)
    r = api->Recv(to, bytes, ncclUint8, s->rank, comms[1], d->link[dir]);
  const ncclResult_t end = api->GroupEnd();
  return settle(pair, ok(r) ? end : r, comms, 2);
}

// Both halves in this thread, segment by segment.
lp_status local_all(lp_nccl_pair *pair, PairEndpoint *s, PairEndpoint *d, const Plan &ps, const Plan &pd) {
  for (int64_t c0 = 0; c0 < ps.total; c0 += ps.seg) {
    int ss, ds;
    LP_TRY(send_prepare(s, ps, c0, &ss));
    LP_TRY(recv_prepare(d, &ds));
    const size_t bytes = (size_t)seg_len(ps, c0) * ps.chunk_bytes;
    LP_TRY(grouped_sendrecv(pair, s->send_ring.slot[ss], d->recv_ring.slot[ds], bytes, s, d));
    LP_TRY(send_finish(s, ss));
    LP_TRY(recv_finish(d, pd, c0, ds));
  }
  return LP_OK;
}

lp_status open_pair(const lp_nccl_pair *pair, lp_xfer_job **out_job) {
  LP_TRY(nccl_pair_check(pair));
  LP_REQUIRE(out_job, "NCCL transfers are asynchronous: out_job must not be NULL");
  return pair->health->check();
}

// The endpoint of a cross-process pair and the plan of a transfer with `peer`; `fn` names the caller.
lp_status open_remote(const char *fn, lp_nccl_pair *pair, const lp_kv *kv, const int32_t *block_ids, int32_t n,
                      int32_t peer, int64_t segment_bytes, lp_xfer_job **out_job, PairEndpoint **ep, Plan *p) {
  LP_TRY(open_pair(pair, out_job));
  LP_REQUIRE(pair->count == 1, "%s needs a cross-process pair; use lp_kv_transfer_local on a local one", fn);
  *ep = &pair->ep[0];
  LP_REQUIRE(peer == 1 - (*ep)->rank, "peer=%d: the only peer of rank %d is %d", peer, (*ep)->rank, 1 - (*ep)->rank);
  return make_plan(pair, *ep, kv, block_ids, n, segment_bytes, p);
}

// Source and destination endpoints of a local pair sending from `src_rank`; `fn` names the caller.
lp_status open_local(const char *fn, lp_nccl_pair *pair, int32_t src_rank, lp_xfer_job **out_job, PairEndpoint **s,
                     PairEndpoint **d) {
  LP_TRY(open_pair(pair, out_job));
  LP_REQUIRE(pair->count == 2, "%s needs a local pair (lp_nccl_pair_create_local)", fn);
  LP_REQUIRE(src_rank == 0 || src_rank == 1, "src_rank=%d must be 0 or 1", src_rank);
  LP_TRY(pair_endpoint(pair, src_rank, s));
  return pair_endpoint(pair, 1 - src_rank, d);
}

// Runs `enqueue` under the pair's lock and hands back a job ending on `stream` (of `device`).
template <class F>
lp_status with_job(lp_nccl_pair *pair, F enqueue, lp_xfer_job **out_job) {
  std::lock_guard<std::mutex> lock(pair->mu);
  lp_xfer_job *job;
  LP_TRY(job_create(pair->health, &job));
  const lp_status st = enqueue(job);
  if (st != LP_OK) {
    job_free(job);
    return st;
  }
  *out_job = job;
  return LP_OK;
}

// This process's half of a transfer on a cross-process pair: the sender's (pack, send; the job
// ends on the link stream) or the receiver's (receive, unpack; the job ends on the unpack stream).
lp_status remote_half(const char *fn, bool send, lp_nccl_pair *pair, const lp_kv *kv, const int32_t *block_ids,
                      int32_t n, int32_t peer, int64_t segment_bytes, lp_xfer_job **out_job) {
  PairEndpoint *ep;
  Plan p;
  LP_TRY(open_remote(fn, pair, kv, block_ids, n, peer, segment_bytes, out_job, &ep, &p));
  return with_job(pair, [&](lp_xfer_job *job) {
    LP_TRY(send ? send_all(pair, ep, p) : recv_all(pair, ep, p));
    return job_record(job, ep->device, send ? ep->link[ep->rank] : ep->unpack);
  }, out_job);
}

}  // namespace

extern "C" lp_status lp_kv_send(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                                int64_t segment_bytes, lp_xfer_job **out_job) {
  return remote_half("lp_kv_send", true, pair, kv, block_ids, n, peer, segment_bytes, out_job);
}

extern "C" lp_status lp_kv_recv(lp_nccl_pair *pair, lp_kv *kv, const int32_t *block_ids, int32_t n, int32_t peer,
                                int64_t segment_bytes, lp_xfer_job **out_job) {
  return remote_half("lp_kv_recv", false, pair, kv, block_ids, n, peer, segment_bytes, out_job);
}

extern "C" lp_status lp_kv_transfer_local(lp_nccl_pair *pair, int32_t src_rank, lp_kv *src_kv,
                                          const int32_t *src_ids, lp_kv *dst_kv, const int32_t *dst_ids, int32_t n,
                                          int64_t segment_bytes, lp_xfer_job **out_job) {
  PairEndpoint *s, *d;
  LP_TRY(open_local("lp_kv_transfer_local", pair, src_rank, out_job, &s, &d));
  Plan ps, pd;
  LP_TRY(make_plan(pair, s, src_kv, src_ids, n, segment_bytes, &ps));
  LP_TRY(make_plan(pair, d, dst_kv, dst_ids, n, segment_bytes, &pd));
  LP_REQUIRE(ps.chunk_bytes == pd.chunk_bytes && ps.total == pd.total, "source and destination caches differ in shape");
  return with_job(pair, [&](lp_xfer_job *job) {
    LP_TRY(local_all(pair, s, d, ps, pd));
    return job_record(job, d->device, d->unpack);
  }, out_job);
}

extern "C" lp_status lp_nccl_local_sendrecv(lp_nccl_pair *pair, int32_t src_rank, lp_dev_buffer *src,
                                            lp_dev_buffer *dst, int64_t bytes, lp_xfer_job **out_job) {
  PairEndpoint *s, *d;
  LP_TRY(open_local("lp_nccl_local_sendrecv", pair, src_rank, out_job, &s, &d));
  LP_TRY(dev_buffer_check(src));
  LP_TRY(dev_buffer_check(dst));
  LP_REQUIRE(src->device == s->device && dst->device == d->device,
             "buffers on devices %d -> %d, pair direction %d -> %d", src->device, dst->device, s->device, d->device);
  LP_REQUIRE(bytes > 0 && (size_t)bytes <= src->bytes && (size_t)bytes <= dst->bytes,
             "bytes=%lld outside the buffers (%zu, %zu)", (long long)bytes, src->bytes, dst->bytes);
  const int dir = src_rank;
  return with_job(pair, [&](lp_xfer_job *job) {
    LP_TRY(grouped_sendrecv(pair, src->ptr, dst->ptr, (size_t)bytes, s, d));
    LP_TRY(job_record(job, s->device, s->link[dir]));
    return job_record(job, d->device, d->link[dir]);
  }, out_job);
}

#endif
