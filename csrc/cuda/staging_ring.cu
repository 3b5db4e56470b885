// Staging rings: a few fixed device slots reused round-robin by the segments of transfers, with
// events so a slot is rewritten only after its previous segment has been read.
#include "transfer_context.cuh"

namespace {

lp_status alloc_slots(StagingRing *r, size_t slot_bytes) {
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) {
    const cudaError_t e = cudaMalloc(&r->slot[s], slot_bytes);
    if (e != cudaSuccess) {
      return LP_FAIL(LP_ERR_OOM, "staging slot %d of %zu bytes on device %d: %s", s, slot_bytes, r->device,
                     cudaGetErrorString(e));
    }
  }
  r->slot_bytes = slot_bytes;
  return LP_OK;
}

void free_slots(StagingRing *r) {
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) {
    if (r->slot[s]) cudaFree(r->slot[s]);
    r->slot[s] = nullptr;
  }
  r->slot_bytes = 0;
}

}  // namespace

lp_status ring_init(StagingRing *r, int device, size_t slot_bytes) {
  LP_REQUIRE(slot_bytes > 0 && slot_bytes % 16 == 0, "staging slot bytes %zu must be a positive multiple of 16",
             slot_bytes);
  r->device = device;
  CUDA_CHECK(cudaSetDevice(device));
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) {
    CUDA_CHECK(cudaEventCreateWithFlags(&r->free_ev[s], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&r->ready_ev[s], cudaEventDisableTiming));
  }
  return alloc_slots(r, slot_bytes);
}

lp_status ring_reserve(StagingRing *r, size_t bytes) {
  if (bytes <= r->slot_bytes) return LP_OK;
  CUDA_CHECK(cudaSetDevice(r->device));
  // Every use of a slot ends with its free event, so once all have fired no one reads the slots.
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) CUDA_CHECK(cudaEventSynchronize(r->free_ev[s]));
  free_slots(r);
  return alloc_slots(r, (bytes + 15) / 16 * 16);
}

void ring_destroy(StagingRing *r) {
  if (r->device < 0) return;
  cudaSetDevice(r->device);
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) {
    if (r->free_ev[s]) cudaEventSynchronize(r->free_ev[s]);
  }
  free_slots(r);
  for (int s = 0; s < LP_KV_RING_SLOTS; s++) {
    if (r->free_ev[s]) cudaEventDestroy(r->free_ev[s]);
    if (r->ready_ev[s]) cudaEventDestroy(r->ready_ev[s]);
    r->free_ev[s] = r->ready_ev[s] = nullptr;
  }
  r->device = -1;
}

lp_status ring_acquire(StagingRing *r, cudaStream_t stream, int *out_slot) {
  const int s = (int)(r->next++ % LP_KV_RING_SLOTS);
  // Waiting on a never-recorded event is a no-op, so fresh slots are free at once.
  CUDA_CHECK(cudaStreamWaitEvent(stream, r->free_ev[s], 0));
  *out_slot = s;
  return LP_OK;
}
