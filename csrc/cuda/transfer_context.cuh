// Shared machinery of the transfer path: device buffers, staging rings, the per-device streams
// of same-process copies, and jobs (events a caller can poll or wait on with a timeout).
#ifndef LP_CUDA_TRANSFER_CONTEXT_CUH
#define LP_CUDA_TRANSFER_CONTEXT_CUH
#include <memory>
#include <mutex>

#include "../common/kv_transfer_rules.h"
#include "cuda_check.h"

// A device allocation handed out by lp_dev_buffer_alloc (the lp_dev_buffer handle of lmpool.h).
struct lp_dev_buffer {
  uint64_t magic;
  int device;
  void *ptr;
  size_t bytes;
};
// LP_ERR_INVALID for NULL or a handle that is not a live device buffer.
lp_status dev_buffer_check(const lp_dev_buffer *b);

// LP_KV_RING_SLOTS staging slots on one device. A slot's first writer waits for free_ev (recorded
// after its last reader); ready_ev orders the writer before the readers.
struct StagingRing {
  int device = -1;
  size_t slot_bytes = 0;
  void *slot[LP_KV_RING_SLOTS] = {};
  cudaEvent_t free_ev[LP_KV_RING_SLOTS] = {};
  cudaEvent_t ready_ev[LP_KV_RING_SLOTS] = {};
  unsigned next = 0;
};
lp_status ring_init(StagingRing *r, int device, size_t slot_bytes);
// Grows the slots to at least `bytes` after every pending use of them has finished.
lp_status ring_reserve(StagingRing *r, size_t bytes);
void ring_destroy(StagingRing *r);
// Takes the next slot; `stream` (its first writer) waits until the slot's last reader is done.
lp_status ring_acquire(StagingRing *r, cudaStream_t stream, int *out_slot);

// Streams and ring of same-process transfers on one device, created on first use and kept for
// the life of the process. `mu` serializes the enqueueing of transfers that use them.
struct TransferContext {
  int device = -1;
  cudaStream_t pack = nullptr, copy = nullptr, unpack = nullptr;
  StagingRing ring;
  // Recorded on `copy` when a segment has landed in another device's ring slot (an event must
  // belong to the device of the stream that records it, so the destination's cannot be used).
  cudaEvent_t link_ev[LP_KV_RING_SLOTS] = {};
  std::mutex mu;
};
lp_status transfer_context(int device, TransferContext **out);
// Lets `device` read and write `peer`'s memory (NVLink P2P); idempotent, a no-op when equal.
lp_status enable_peer_access(int device, int peer);
// Creates a non-blocking stream on the current device; high priority for link streams (so NCCL
// kernels are not queued behind pack kernels), default priority otherwise.
lp_status create_transfer_stream(bool high_priority, cudaStream_t *out);

// Reports a failure of the thing a job depends on (an aborted or failed NCCL pair).
struct JobProbe {
  virtual ~JobProbe() = default;
  virtual lp_status check() = 0;
};

// Up to two completion events (one per device a transfer ends on): the lp_xfer_job handle.
struct lp_xfer_job {
  uint64_t magic;
  int count = 0;
  int device[2] = {};
  cudaEvent_t done[2] = {};
  std::shared_ptr<JobProbe> probe;
};
lp_status job_create(std::shared_ptr<JobProbe> probe, lp_xfer_job **out);
// Records a completion event of the job on `stream` (of `device`).
lp_status job_record(lp_xfer_job *job, int device, cudaStream_t stream);
// Hands the job to the caller through out_job, or (out_job NULL) waits for it and frees it.
lp_status job_finish(lp_xfer_job *job, lp_xfer_job **out_job);
void job_free(lp_xfer_job *job);

#endif
