// Per-device streams and staging ring of same-process transfers (pack, copy-engine, unpack).
#include "transfer_context.cuh"

namespace {

constexpr int kMaxDevices = 64;
std::mutex contexts_mu;
TransferContext *contexts[kMaxDevices];

bool peer_enabled[kMaxDevices][kMaxDevices];

}  // namespace

lp_status enable_peer_access(int device, int peer) {
  // One device (two caches of it, or a CUDA IPC view of another process's cache on it): its own
  // memory needs no peer access, and cudaDeviceEnablePeerAccess refuses a device as its own peer.
  if (device == peer) return LP_OK;
  LP_REQUIRE(device >= 0 && peer >= 0 && device < kMaxDevices && peer < kMaxDevices, "devices %d and %d", device, peer);
  std::lock_guard<std::mutex> lock(contexts_mu);
  if (peer_enabled[device][peer]) return LP_OK;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can) return LP_FAIL(LP_ERR_UNSUPPORTED, "device %d cannot access device %d directly (no P2P path)", device, peer);
  CUDA_CHECK(cudaSetDevice(device));
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // clears the non-sticky error this call leaves behind
  } else if (e != cudaSuccess) {
    return LP_FAIL(LP_ERR_CUDA, "cudaDeviceEnablePeerAccess(%d -> %d): %s", device, peer, cudaGetErrorString(e));
  }
  peer_enabled[device][peer] = true;
  return LP_OK;
}

lp_status create_transfer_stream(bool high_priority, cudaStream_t *out) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(out, cudaStreamNonBlocking, high_priority ? greatest : least));
  return LP_OK;
}

lp_status transfer_context(int device, TransferContext **out) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  LP_REQUIRE(device >= 0 && device < count && device < kMaxDevices, "device %d does not exist (%d visible)", device,
             count);
  std::lock_guard<std::mutex> lock(contexts_mu);
  if (contexts[device]) {
    *out = contexts[device];
    return LP_OK;
  }
  TransferContext *ctx = new TransferContext();
  ctx->device = device;
  lp_status st = LP_OK;
  if (cudaSetDevice(device) != cudaSuccess) st = LP_FAIL(LP_ERR_CUDA, "cudaSetDevice(%d) failed", device);
  if (st == LP_OK) st = create_transfer_stream(false, &ctx->pack);
  if (st == LP_OK) st = create_transfer_stream(true, &ctx->copy);
  if (st == LP_OK) st = create_transfer_stream(false, &ctx->unpack);
  for (int s = 0; s < LP_KV_RING_SLOTS && st == LP_OK; s++) {
    if (cudaEventCreateWithFlags(&ctx->link_ev[s], cudaEventDisableTiming) != cudaSuccess)
      st = LP_FAIL(LP_ERR_CUDA, "creating transfer events on device %d failed", device);
  }
  if (st == LP_OK) st = ring_init(&ctx->ring, device, (size_t)LP_KV_SEGMENT_MAX_BYTES);
  if (st != LP_OK) {
    // A half-made context is dropped; its streams are few bytes and the error is reported.
    ring_destroy(&ctx->ring);
    delete ctx;
    return st;
  }
  contexts[device] = ctx;
  *out = ctx;
  return LP_OK;
}
