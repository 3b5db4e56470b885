// Run-time loading of libnccl.so.2 (see nccl_api.cuh for why).
#ifdef LP_HAVE_NCCL
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "nccl_api.cuh"

namespace {

std::once_flag load_once;
NcclApi api_table;
lp_status load_status = LP_OK;
char load_error[768];

void *open_library() {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h) return h;
  int n = snprintf(load_error, sizeof load_error, "libnccl.so.2: %s", dlerror());
  // env.sh points NCCL_HOME at python's nvidia-nccl package; try it when LD_LIBRARY_PATH lacks it.
  const char *home = getenv("NCCL_HOME");
  if (home && *home) {
    char path[512];
    snprintf(path, sizeof path, "%s/lib/libnccl.so.2", home);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && n > 0 && (size_t)n < sizeof load_error)
      snprintf(load_error + n, sizeof load_error - (size_t)n, "; %s: %s", path, dlerror());
  }
  return h;
}

template <class F>
bool resolve(void *h, const char *name, F *out) {
  *out = (F)dlsym(h, name);
  if (!*out) snprintf(load_error, sizeof load_error, "libnccl.so.2 has no %s (NCCL >= 2.19 needed)", name);
  return *out != nullptr;
}

void load() {
  // NVLink multicast stays off (shared hosts): default NCCL_NVLS_ENABLE to 0 before NCCL reads its
  // environment, never replace a value that is set, and refuse to run with it enabled.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  if (nvls && strcmp(nvls, "0") != 0) {
    snprintf(load_error, sizeof load_error, "NCCL_NVLS_ENABLE=%s, but NVLink multicast must stay off (set it to 0)", nvls);
    load_status = LP_ERR_UNSUPPORTED;
    return;
  }
  void *h = open_library();
  if (!h) {
    load_status = LP_ERR_UNSUPPORTED;
    return;
  }
  NcclApi &a = api_table;
  const bool ok = resolve(h, "ncclGetVersion", &a.GetVersion) && resolve(h, "ncclGetUniqueId", &a.GetUniqueId) &&
                  resolve(h, "ncclCommInitRankConfig", &a.CommInitRankConfig) &&
                  resolve(h, "ncclCommSplit", &a.CommSplit) &&
                  resolve(h, "ncclCommGetAsyncError", &a.CommGetAsyncError) &&
                  resolve(h, "ncclCommFinalize", &a.CommFinalize) && resolve(h, "ncclCommDestroy", &a.CommDestroy) &&
                  resolve(h, "ncclCommAbort", &a.CommAbort) && resolve(h, "ncclSend", &a.Send) &&
                  resolve(h, "ncclRecv", &a.Recv) && resolve(h, "ncclGroupStart", &a.GroupStart) &&
                  resolve(h, "ncclGroupEnd", &a.GroupEnd) && resolve(h, "ncclGetErrorString", &a.GetErrorString) &&
                  resolve(h, "ncclGetLastError", &a.GetLastError);
  int version = 0;
  if (ok && a.GetVersion(&version) == ncclSuccess && version < NCCL_VERSION(2, 19, 0)) {
    snprintf(load_error, sizeof load_error, "NCCL %d is too old (2.19 or newer needed)", version);
    load_status = LP_ERR_UNSUPPORTED;
    return;
  }
  load_status = ok ? LP_OK : LP_ERR_UNSUPPORTED;
}

}  // namespace

lp_status nccl_api(const NcclApi **out) {
  std::call_once(load_once, load);
  if (load_status != LP_OK)
    return LP_FAIL(load_status, "NCCL is not available: %s (source .gpu/env.sh, or add NCCL's lib to LD_LIBRARY_PATH)",
                   load_error);
  *out = &api_table;
  return LP_OK;
}

lp_status nccl_fail(const NcclApi *api, ncclResult_t r, const char *what, const char *file, int line) {
  const char *detail = api->GetLastError(nullptr);
  return lp_fail(LP_ERR_NCCL, file, line, "%s: %s%s%s", what, api->GetErrorString(r), detail && *detail ? ": " : "",
                 detail ? detail : "");
}

int64_t nccl_deadline(int32_t timeout_ms) {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() + timeout_ms;
}

lp_status nccl_wait_ready(const NcclApi *api, ncclComm_t const *comms, int count, int64_t deadline_ms) {
  using namespace std::chrono;
  for (;;) {
    bool pending = false;
    for (int i = 0; i < count; i++) {
      ncclResult_t r = ncclSuccess;
      NCCL_OK(api, api->CommGetAsyncError(comms[i], &r));
      if (r == ncclInProgress) {
        pending = true;
      } else if (r != ncclSuccess) {
        return nccl_fail(api, r, "NCCL communicator", __FILE__, __LINE__);
      }
    }
    if (!pending) return LP_OK;
    if (duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count() >= deadline_ms)
      return LP_FAIL(LP_ERR_TIMEOUT, "NCCL communicator still in progress at the deadline (peer not responding?)");
    std::this_thread::yield();
  }
}

#endif
