// A direct NVLink pair's NCCL state: two communicators (comm[d] carries data from rank d to rank
// 1 - d, so the two directions never queue behind each other), and per endpoint the streams and
// staging rings of the packed transfer. A cross-process pair holds one endpoint (this process's
// rank); a local pair holds both (benchmarks and tests).
#ifndef LP_CUDA_NCCL_PAIR_CUH
#define LP_CUDA_NCCL_PAIR_CUH
#ifdef LP_HAVE_NCCL
#include "nccl_api.cuh"
#include "transfer_context.cuh"

struct PairEndpoint {
  int rank = -1, device = -1;
  ncclComm_t comm[2] = {};
  cudaStream_t link[2] = {};  // link[d]: this endpoint's stream for comm[d] (high priority)
  cudaStream_t pack = nullptr, unpack = nullptr;
  StagingRing send_ring, recv_ring;
};

// Shared with the jobs of the pair: reports an abort, a destroy, or an asynchronous NCCL error.
struct PairHealth : JobProbe {
  const NcclApi *api = nullptr;
  std::mutex mu;
  bool aborted = false, destroyed = false;
  ncclComm_t comms[4] = {};
  int count = 0;
  lp_status check() override;
};

// The lp_nccl_pair handle of lmpool.h.
struct lp_nccl_pair {
  uint64_t magic = 0;
  const NcclApi *api = nullptr;
  int count = 0;  // endpoints in this process: 1 or 2
  PairEndpoint ep[2];
  int32_t timeout_ms = 0;
  std::shared_ptr<PairHealth> health;
  std::mutex mu;  // serializes enqueueing on the pair
};

// LP_ERR_INVALID for NULL or a handle that is not a live pair.
lp_status nccl_pair_check(const lp_nccl_pair *pair);
// The endpoint of `rank` in this process.
lp_status pair_endpoint(lp_nccl_pair *pair, int rank, PairEndpoint **out);

#endif
#endif
