// NCCL, loaded at run time: the CUDA library links no libnccl, so it loads (and serves models)
// on machines without NCCL, and only the transfer calls that need it report that it is missing.
// Built only with LP_HAVE_NCCL (the Makefile defines it when NCCL_HOME points at the headers).
#ifndef LP_CUDA_NCCL_API_CUH
#define LP_CUDA_NCCL_API_CUH
#ifdef LP_HAVE_NCCL
#include <nccl.h>

#include "cuda_check.h"

// The NCCL entry points LMPool uses, resolved with dlsym from libnccl.so.2.
struct NcclApi {
  decltype(&ncclGetVersion) GetVersion;
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig;
  decltype(&ncclCommSplit) CommSplit;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&ncclCommFinalize) CommFinalize;
  decltype(&ncclCommDestroy) CommDestroy;
  decltype(&ncclCommAbort) CommAbort;
  decltype(&ncclSend) Send;
  decltype(&ncclRecv) Recv;
  decltype(&ncclGroupStart) GroupStart;
  decltype(&ncclGroupEnd) GroupEnd;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclGetLastError) GetLastError;
};

// Loads NCCL on first use; the error names every path tried and the loader's message.
lp_status nccl_api(const NcclApi **out);

// Records an NCCL failure (with NCCL's own last-error detail) and returns LP_ERR_NCCL.
lp_status nccl_fail(const NcclApi *api, ncclResult_t r, const char *what, const char *file, int line);

// A call that must succeed outright.
#define NCCL_OK(api, expr)                                                                         \
  do {                                                                                             \
    ncclResult_t lp_r_ = (expr);                                                                   \
    if (lp_r_ != ncclSuccess) return nccl_fail((api), lp_r_, #expr, __FILE__, __LINE__);           \
  } while (0)
// Polls the communicators until none is in progress, an error shows up, or deadline_ms (a
// steady-clock time from nccl_deadline) passes (LP_ERR_TIMEOUT).
lp_status nccl_wait_ready(const NcclApi *api, ncclComm_t const *comms, int count, int64_t deadline_ms);
int64_t nccl_deadline(int32_t timeout_ms);

#endif
#endif
