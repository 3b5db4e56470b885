// Transfer jobs: the completion events of an enqueued transfer, polled or waited on with a
// timeout. Waiting spins on cudaEventQuery with a yield: transfers last tens of microseconds to
// milliseconds, and a sleeping wait would add its wake-up latency to every one of them.
#include <chrono>
#include <thread>

#include "transfer_context.cuh"

namespace {

constexpr uint64_t kJobMagic = 0x4c50584a4f42ULL;  // "LPXJOB"

lp_status job_check(const lp_xfer_job *job) {
  LP_REQUIRE(job && job->magic == kJobMagic, "handle %p is not a live transfer job", (const void *)job);
  return LP_OK;
}

// 1 when every event has fired, 0 when one is pending; a failed probe or event is an error.
lp_status job_poll(lp_xfer_job *job, int *done) {
  if (job->probe) LP_TRY(job->probe->check());
  for (int k = 0; k < job->count; k++) {
    const cudaError_t e = cudaEventQuery(job->done[k]);
    if (e == cudaErrorNotReady) {
      *done = 0;
      return LP_OK;
    }
    if (e != cudaSuccess) return LP_FAIL(LP_ERR_CUDA, "transfer on device %d failed: %s", job->device[k], cudaGetErrorString(e));
  }
  *done = 1;
  return LP_OK;
}

lp_status job_wait(lp_xfer_job *job, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int done = 0;
    LP_TRY(job_poll(job, &done));
    if (done) return LP_OK;
    if (std::chrono::steady_clock::now() >= deadline)
      return LP_FAIL(LP_ERR_TIMEOUT, "transfer not complete after %lld ms", (long long)timeout_ms);
    std::this_thread::yield();
  }
}

}  // namespace

lp_status job_create(std::shared_ptr<JobProbe> probe, lp_xfer_job **out) {
  lp_xfer_job *job = new lp_xfer_job();
  job->magic = kJobMagic;
  job->probe = std::move(probe);
  *out = job;
  return LP_OK;
}

lp_status job_record(lp_xfer_job *job, int device, cudaStream_t stream) {
  LP_REQUIRE(job->count < 2, "a transfer job holds at most two completion events");
  CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  job->device[job->count] = device;
  job->done[job->count++] = ev;
  CUDA_CHECK(cudaEventRecord(ev, stream));
  return LP_OK;
}

void job_free(lp_xfer_job *job) {
  if (!job) return;
  job->magic = 0;
  // Destroying a pending event is allowed: its resources go when the work completes.
  for (int k = 0; k < job->count; k++) cudaEventDestroy(job->done[k]);
  delete job;
}

lp_status job_finish(lp_xfer_job *job, lp_xfer_job **out_job) {
  if (out_job) {
    *out_job = job;
    return LP_OK;
  }
  // Only local work finishes this way (callers require out_job where a peer is involved), so the
  // wait is bounded by the device, not by another process.
  const lp_status st = job_wait(job, INT32_MAX);
  job_free(job);
  return st;
}

extern "C" lp_status lp_xfer_query(lp_xfer_job *job, int32_t *out_done) {
  LP_REQUIRE(out_done, "out_done is NULL");
  if (!job) {
    *out_done = 1;
    return LP_OK;
  }
  LP_TRY(job_check(job));
  int done = 0;
  LP_TRY(job_poll(job, &done));
  *out_done = done;
  return LP_OK;
}

extern "C" lp_status lp_xfer_wait(lp_xfer_job *job, int32_t timeout_ms) {
  LP_REQUIRE(timeout_ms >= 0, "timeout_ms=%d must be >= 0", timeout_ms);
  if (!job) return LP_OK;
  LP_TRY(job_check(job));
  return job_wait(job, timeout_ms);
}

extern "C" lp_status lp_xfer_release(lp_xfer_job *job) {
  if (!job) return LP_OK;
  LP_TRY(job_check(job));
  job_free(job);
  return LP_OK;
}
