// Creation, warm-up, abort and destruction of NCCL pairs. Communicators are non-blocking
// (ncclConfig_t.blocking = 0) so initialization and finalization poll with a deadline: a peer
// that never joins makes lp_nccl_pair_create fail with LP_ERR_TIMEOUT instead of hanging.
#ifdef LP_HAVE_NCCL
#include <string.h>

#include <chrono>
#include <thread>

#include "nccl_pair.cuh"

namespace {

// Polls a communicator slot that NCCL fills asynchronously (see the create loop), up to the deadline.
lp_status wait_comm_assigned(ncclComm_t *slot, int64_t deadline_ms) {
  using namespace std::chrono;
  while (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == nullptr) {
    if (duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() >= deadline_ms)
      return LP_FAIL(LP_ERR_TIMEOUT, "NCCL communicator handle still unassigned at the deadline (peer not joining?)");
    std::this_thread::yield();
  }
  return LP_OK;
}

constexpr uint64_t kPairMagic = 0x4c504e50414952ULL;  // "LPNPAIR"

ncclConfig_t pair_config(int nchannels) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (nchannels > 0) config.minCTAs = config.maxCTAs = nchannels;
  return config;
}

lp_status init_endpoint_resources(PairEndpoint *ep, size_t slot_bytes) {
  CUDA_CHECK(cudaSetDevice(ep->device));
  LP_TRY(create_transfer_stream(true, &ep->link[0]));
  LP_TRY(create_transfer_stream(true, &ep->link[1]));
  LP_TRY(create_transfer_stream(false, &ep->pack));
  LP_TRY(create_transfer_stream(false, &ep->unpack));
  LP_TRY(ring_init(&ep->send_ring, ep->device, slot_bytes));
  return ring_init(&ep->recv_ring, ep->device, slot_bytes);
}

// Waits (polling, bounded) until every stream of the endpoint is idle.
bool drain_endpoint(PairEndpoint *ep, int64_t deadline_ms) {
  if (ep->device < 0) return true;
  cudaSetDevice(ep->device);
  cudaStream_t streams[4] = {ep->link[0], ep->link[1], ep->pack, ep->unpack};
  for (cudaStream_t s : streams) {
    if (!s) continue;
    while (cudaStreamQuery(s) == cudaErrorNotReady) {
      if (nccl_deadline(0) >= deadline_ms) return false;
      std::this_thread::yield();
    }
  }
  return true;
}

void free_endpoint(PairEndpoint *ep) {
  if (ep->device < 0) return;
  cudaSetDevice(ep->device);
  ring_destroy(&ep->send_ring);
  ring_destroy(&ep->recv_ring);
  for (cudaStream_t s : {ep->link[0], ep->link[1], ep->pack, ep->unpack})
    if (s) cudaStreamDestroy(s);
}

void abort_comms(lp_nccl_pair *pair) {
  std::lock_guard<std::mutex> lock(pair->health->mu);
  if (pair->health->aborted) return;
  pair->health->aborted = true;
  for (int e = 0; e < pair->count; e++)
    for (ncclComm_t &c : pair->ep[e].comm) {
      if (c) pair->api->CommAbort(c);
      c = nullptr;
    }
}

// Frees a pair whose communicators are finalized or aborted; memory that device work may still
// use is leaked rather than freed under it.
lp_status release_pair(lp_nccl_pair *pair) {
  const int64_t deadline = nccl_deadline(pair->timeout_ms);
  bool drained = true;
  for (int e = 0; e < pair->count; e++) drained = drain_endpoint(&pair->ep[e], deadline) && drained;
  {
    std::lock_guard<std::mutex> lock(pair->health->mu);
    pair->health->destroyed = true;
  }
  pair->magic = 0;
  if (!drained)
    return LP_FAIL(LP_ERR_TIMEOUT, "NCCL pair streams still busy %d ms after abort; staging memory leaked",
                   pair->timeout_ms);
  for (int e = 0; e < pair->count; e++) free_endpoint(&pair->ep[e]);
  delete pair;
  return LP_OK;
}

lp_status fail_create(lp_nccl_pair *pair, lp_status st) {
  char saved[1024];
  lp_last_error(saved, sizeof saved);
  abort_comms(pair);
  // Cleanup records an error only if it fails; then say both, the cause first.
  if (release_pair(pair) != LP_OK) return LP_FAIL(st, "%s (cleanup after it timed out)", saved);
  return st;
}

// One send each way on every endpoint, so connections are set up before the first transfer.
lp_status warm(lp_nccl_pair *pair) {
  const NcclApi *api = pair->api;
  const auto ok = [](ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; };
  ncclResult_t res = api->GroupStart();
  for (int e = 0; e < pair->count && ok(res); e++) {
    PairEndpoint *ep = &pair->ep[e];
    const int r = ep->rank, peer = 1 - r;
    if (cudaSetDevice(ep->device) != cudaSuccess) break;
    res = api->Send(ep->send_ring.slot[0], ep->send_ring.slot_bytes, ncclUint8, peer, ep->comm[r], ep->link[r]);
    if (ok(res))
      res = api->Recv(ep->recv_ring.slot[0], ep->recv_ring.slot_bytes, ncclUint8, peer, ep->comm[peer], ep->link[peer]);
  }
  const ncclResult_t end = api->GroupEnd();  // always closes the group
  if (ok(res)) res = end;
  if (!ok(res)) return nccl_fail(api, res, "warm-up send of the NCCL pair", __FILE__, __LINE__);
  const int64_t deadline = nccl_deadline(pair->timeout_ms);
  LP_TRY(nccl_wait_ready(api, pair->health->comms, pair->health->count, deadline));
  for (int e = 0; e < pair->count; e++) {
    if (!drain_endpoint(&pair->ep[e], deadline))
      return LP_FAIL(LP_ERR_TIMEOUT, "warm-up send of the NCCL pair did not complete within %d ms", pair->timeout_ms);
  }
  return LP_OK;
}

// Creates comm[0] of every endpoint from the id, then comm[1] by splitting it, then warms up.
lp_status create_pair(const ncclUniqueId &id, const int *ranks, const int *devices, int count, int nchannels,
                      int64_t slot_bytes, int32_t timeout_ms, lp_nccl_pair **out_pair) {
  const NcclApi *api;
  LP_TRY(nccl_api(&api));
  LP_REQUIRE(timeout_ms > 0, "timeout_ms=%d must be positive", timeout_ms);
  LP_REQUIRE(nchannels >= 0 && nchannels <= 64, "nchannels=%d must be in [0, 64]", nchannels);
  LP_REQUIRE(slot_bytes >= 0 && slot_bytes % 16 == 0, "slot_bytes=%lld must be >= 0 and a multiple of 16",
             (long long)slot_bytes);
  lp_nccl_pair *pair = new lp_nccl_pair();
  pair->magic = kPairMagic;
  pair->api = api;
  pair->count = count;
  pair->timeout_ms = timeout_ms;
  pair->health = std::make_shared<PairHealth>();
  pair->health->api = api;
  for (int e = 0; e < count; e++) {
    pair->ep[e].rank = ranks[e];
    pair->ep[e].device = devices[e];
  }
  ncclConfig_t config = pair_config(nchannels);
  const int64_t deadline = nccl_deadline(timeout_ms);
  for (int d = 0; d < 2; d++) {
    lp_status st = LP_OK;
    ncclResult_t r = api->GroupStart();
    for (int e = 0; e < count && (r == ncclSuccess || r == ncclInProgress) && st == LP_OK; e++) {
      PairEndpoint *ep = &pair->ep[e];
      const cudaError_t ce = cudaSetDevice(ep->device);
      if (ce != cudaSuccess) {
        st = LP_FAIL(LP_ERR_CUDA, "cudaSetDevice(%d): %s", ep->device, cudaGetErrorString(ce));
        break;
      }
      r = d == 0 ? api->CommInitRankConfig(&ep->comm[0], 2, id, ep->rank, &config)
                 : api->CommSplit(ep->comm[0], 0, ep->rank, &ep->comm[1], &config);
    }
    const ncclResult_t end = api->GroupEnd();  // always closes the group, even after a failure
    if (r == ncclSuccess || r == ncclInProgress) r = end;
    if (st == LP_OK && r != ncclSuccess && r != ncclInProgress)
      st = nccl_fail(api, r, d == 0 ? "ncclCommInitRankConfig" : "ncclCommSplit", __FILE__, __LINE__);
    // A non-blocking init/split issued inside a group may assign its handle only when NCCL's
    // background work runs, after GroupEnd returned ncclInProgress: wait for the slot first.
    for (int e = 0; e < count && st == LP_OK; e++) st = wait_comm_assigned(&pair->ep[e].comm[d], deadline);
    if (st != LP_OK) return fail_create(pair, st);
    for (int e = 0; e < count; e++) pair->health->comms[pair->health->count++] = pair->ep[e].comm[d];
    if (st == LP_OK) st = nccl_wait_ready(api, pair->health->comms, pair->health->count, deadline);
    if (st != LP_OK) return fail_create(pair, st);
  }
  const size_t slot = slot_bytes > 0 ? (size_t)slot_bytes : (size_t)LP_KV_SEGMENT_MAX_BYTES;
  for (int e = 0; e < count; e++) {
    const lp_status st = init_endpoint_resources(&pair->ep[e], slot);
    if (st != LP_OK) return fail_create(pair, st);
  }
  const lp_status st = warm(pair);
  if (st != LP_OK) return fail_create(pair, st);
  *out_pair = pair;
  return LP_OK;
}

}  // namespace

lp_status PairHealth::check() {
  std::lock_guard<std::mutex> lock(mu);
  if (destroyed) return LP_FAIL(LP_ERR_NCCL, "the NCCL pair of this transfer was destroyed");
  if (aborted) return LP_FAIL(LP_ERR_NCCL, "the NCCL pair of this transfer was aborted");
  for (int i = 0; i < count; i++) {
    ncclResult_t r = ncclSuccess;
    if (api->CommGetAsyncError(comms[i], &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
      return nccl_fail(api, r, "NCCL transfer", __FILE__, __LINE__);
  }
  return LP_OK;
}

lp_status nccl_pair_check(const lp_nccl_pair *pair) {
  LP_REQUIRE(pair && pair->magic == kPairMagic, "handle %p is not a live NCCL pair", (const void *)pair);
  return LP_OK;
}

lp_status pair_endpoint(lp_nccl_pair *pair, int rank, PairEndpoint **out) {
  for (int e = 0; e < pair->count; e++) {
    if (pair->ep[e].rank == rank) {
      *out = &pair->ep[e];
      return LP_OK;
    }
  }
  return LP_FAIL(LP_ERR_INVALID, "rank %d of this NCCL pair is not in this process", rank);
}

extern "C" lp_status lp_nccl_version(int32_t *out_version) {
  LP_REQUIRE(out_version, "out_version is NULL");
  const NcclApi *api;
  LP_TRY(nccl_api(&api));
  int v = 0;
  NCCL_OK(api, api->GetVersion(&v));
  *out_version = v;
  return LP_OK;
}

extern "C" lp_status lp_nccl_unique_id(void *out_id128) {
  LP_REQUIRE(out_id128, "out_id128 is NULL");
  const NcclApi *api;
  LP_TRY(nccl_api(&api));
  static_assert(sizeof(ncclUniqueId) == 128, "NCCL unique ids are 128 bytes");
  ncclUniqueId id;
  NCCL_OK(api, api->GetUniqueId(&id));
  memcpy(out_id128, &id, sizeof id);
  return LP_OK;
}

extern "C" lp_status lp_nccl_pair_create(const void *unique_id128, int32_t nranks, int32_t rank, int32_t device,
                                         int32_t nchannels, int64_t slot_bytes, int32_t timeout_ms,
                                         lp_nccl_pair **out_pair) {
  LP_REQUIRE(unique_id128 && out_pair, "null unique id or out_pair");
  LP_REQUIRE(nranks == 2, "nranks=%d: a pair communicator has exactly 2 ranks", nranks);
  LP_REQUIRE(rank == 0 || rank == 1, "rank=%d must be 0 or 1", rank);
  ncclUniqueId id;
  memcpy(&id, unique_id128, sizeof id);
  return create_pair(id, &rank, &device, 1, nchannels, slot_bytes, timeout_ms, out_pair);
}

extern "C" lp_status lp_nccl_pair_create_local(int32_t device0, int32_t device1, int32_t nchannels, int64_t slot_bytes,
                                               int32_t timeout_ms, lp_nccl_pair **out_pair) {
  LP_REQUIRE(out_pair, "out_pair is NULL");
  LP_REQUIRE(device0 != device1, "a local pair needs two devices (got %d twice)", device0);
  const NcclApi *api;
  LP_TRY(nccl_api(&api));
  ncclUniqueId id;
  NCCL_OK(api, api->GetUniqueId(&id));
  const int ranks[2] = {0, 1}, devices[2] = {device0, device1};
  return create_pair(id, ranks, devices, 2, nchannels, slot_bytes, timeout_ms, out_pair);
}

extern "C" lp_status lp_nccl_pair_abort(lp_nccl_pair *pair) {
  LP_TRY(nccl_pair_check(pair));
  abort_comms(pair);
  return LP_OK;
}

extern "C" lp_status lp_nccl_pair_destroy(lp_nccl_pair *pair) {
  if (!pair) return LP_OK;
  LP_TRY(nccl_pair_check(pair));
  std::unique_lock<std::mutex> lock(pair->mu);
  const NcclApi *api = pair->api;
  bool finalized = false;
  {
    std::lock_guard<std::mutex> hl(pair->health->mu);
    finalized = pair->health->aborted;
  }
  if (!finalized) {
    // Finalize flushes pending operations; a peer that is gone makes it time out, then abort.
    bool ok = true;
    for (int e = 0; e < pair->count; e++)
      for (ncclComm_t c : pair->ep[e].comm) {
        const ncclResult_t r = api->CommFinalize(c);
        ok = ok && (r == ncclSuccess || r == ncclInProgress);
      }
    ok = ok && nccl_wait_ready(api, pair->health->comms, pair->health->count, nccl_deadline(pair->timeout_ms)) == LP_OK;
    if (ok) {
      std::lock_guard<std::mutex> hl(pair->health->mu);
      pair->health->destroyed = true;
      for (int e = 0; e < pair->count; e++)
        for (ncclComm_t &c : pair->ep[e].comm) {
          api->CommDestroy(c);
          c = nullptr;
        }
    } else {
      abort_comms(pair);
    }
  }
  lock.unlock();
  return release_pair(pair);
}

#endif
