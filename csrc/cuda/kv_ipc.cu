// CUDA IPC of KV caches: a worker exports its KV tensor as a 64-byte handle, and a peer worker
// maps it as a KV view, so one process can move blocks between the two caches with the copy
// engine or a kernel (lp_kv_peer_copy) without the other process taking part. The exporter must
// keep its cache alive until every view of it is closed. The two processes may share one device
// (the device-local path): the view then lives on that device and a copy is device-to-device;
// the lazy peer-access flag only acts on an allocation of another device.
#include <string.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "transfer_context.cuh"
#include "model.cuh"

namespace {

std::mutex views_mu;
std::unordered_set<lp_kv *> views;
// Views get ids from the top half of the range, so no CUDA graph captured for a real cache
// (kv_cache.cu numbers those from 1) ever matches one.
std::atomic<uint64_t> next_view_id{1ull << 63};

}  // namespace

extern "C" lp_status lp_kv_ipc_handle(lp_kv *kv, void *out_handle64) {
  LP_REQUIRE(kv && out_handle64, "null kv or out_handle64");
  static_assert(sizeof(cudaIpcMemHandle_t) == 64, "CUDA IPC handles are 64 bytes");
  {
    std::lock_guard<std::mutex> lock(views_mu);
    LP_REQUIRE(!views.count(kv), "a KV view cannot be exported again; export the owner's cache");
  }
  CUDA_CHECK(cudaSetDevice(kv->device));
  cudaIpcMemHandle_t h;
  CUDA_CHECK(cudaIpcGetMemHandle(&h, kv->data));
  memcpy(out_handle64, &h, sizeof h);
  return LP_OK;
}

extern "C" lp_status lp_kv_ipc_open(const void *handle64, lp_kv *like, int32_t num_blocks, lp_kv **out_view) {
  LP_REQUIRE(handle64 && like && out_view, "null handle, like_kv or out_view");
  LP_REQUIRE(num_blocks > 0, "num_blocks=%d must be positive", num_blocks);
  cudaIpcMemHandle_t h;
  memcpy(&h, handle64, sizeof h);
  CUDA_CHECK(cudaSetDevice(like->device));
  void *ptr = nullptr;
  CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
  lp_kv *view = new lp_kv(*like);
  view->data = (bf16 *)ptr;
  view->num_blocks = num_blocks;
  view->id = next_view_id++;
  {
    std::lock_guard<std::mutex> lock(views_mu);
    views.insert(view);
  }
  *out_view = view;
  return LP_OK;
}

extern "C" lp_status lp_kv_ipc_close(lp_kv *view) {
  if (!view) return LP_OK;
  {
    std::lock_guard<std::mutex> lock(views_mu);
    LP_REQUIRE(views.erase(view) == 1, "handle %p is not an open KV view", (void *)view);
  }
  cudaSetDevice(view->device);
  // Work still using the mapping must finish first: the caller waits for its jobs; this makes a
  // forgotten one an ordering error rather than a fault.
  cudaDeviceSynchronize();
  const cudaError_t e = cudaIpcCloseMemHandle(view->data);
  delete view;
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_CUDA, "cudaIpcCloseMemHandle: %s", cudaGetErrorString(e));
  return LP_OK;
}
