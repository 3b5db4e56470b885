// Paged KV cache of the CUDA build: one bf16 tensor [L, 2, num_blocks, block_size, kv_heads,
// head_dim], and lp_kv_gather_host / lp_kv_scatter_host of blocks through host memory.
#include <stdlib.h>

#include <atomic>

#include "model.cuh"

namespace {

std::atomic<uint64_t> next_kv_id{1};

// One CTA per (layer, side, block) chunk; chunks are multiples of 32 bytes (block_size >= 16).
__global__ void kv_pack_kernel(uint4 *cache, int num_blocks, int n, size_t chunk_vec, const int32_t *ids,
                               uint4 *packed, bool unpack) {
  const int c = blockIdx.x;  // (layer * 2 + side) * n + i
  const int ls = c / n, i = c % n;
  uint4 *src = cache + ((size_t)ls * num_blocks + ids[i]) * chunk_vec;
  uint4 *dst = packed + (size_t)c * chunk_vec;
  if (unpack) {
    for (size_t v = threadIdx.x; v < chunk_vec; v += blockDim.x) src[v] = dst[v];
  } else {
    for (size_t v = threadIdx.x; v < chunk_vec; v += blockDim.x) dst[v] = src[v];
  }
}

lp_status launch_pack(const lp_kv *kv, const int32_t *ids, int n, void *packed, bool unpack,
                      cudaStream_t stream) {
  LP_REQUIRE(kv && ids && packed && n > 0, "kv pack: null argument or n=%d", n);
  const size_t chunk_vec = kv->chunk_elems * 2 / 16;
  const int chunks = kv->num_layers * 2 * n;
  kv_pack_kernel<<<chunks, 256, 0, stream>>>((uint4 *)kv->data, kv->num_blocks, n, chunk_vec, ids,
                                             (uint4 *)packed, unpack);
  CUDA_CHECK_LAUNCH();
  return LP_OK;
}

size_t block_bytes(const lp_kv *kv) { return (size_t)kv->num_layers * 2 * kv->chunk_elems * 2; }

lp_status check_ids(const lp_kv *kv, const int32_t *ids, int n) {
  LP_REQUIRE(ids && n >= 0, "null block ids or n=%d", n);
  for (int i = 0; i < n; i++)
    LP_REQUIRE(ids[i] >= 0 && ids[i] < kv->num_blocks, "block id %d (index %d) out of range [0, %d)", ids[i], i,
               kv->num_blocks);
  return LP_OK;
}

// Host wrapper: ids and packed data travel through temporary device buffers.
lp_status pack_host(lp_kv *kv, const int32_t *ids, int n, void *host, bool unpack) {
  LP_TRY(check_ids(kv, ids, n));
  LP_REQUIRE(host, "null host buffer");
  if (n == 0) return LP_OK;
  CUDA_CHECK(cudaSetDevice(kv->device));
  const size_t bytes = (size_t)n * block_bytes(kv);
  int32_t *d_ids = nullptr;
  void *d_buf = nullptr;
  lp_status st = LP_OK;
  cudaStream_t stream = 0;  // steps end synchronized, so the legacy stream needs no ordering
  cudaError_t e = cudaMalloc(&d_ids, (size_t)n * 4);
  if (e == cudaSuccess) e = cudaMalloc(&d_buf, bytes);
  if (e == cudaSuccess) e = cudaMemcpyAsync(d_ids, ids, (size_t)n * 4, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess && unpack) e = cudaMemcpyAsync(d_buf, host, bytes, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) {
    st = launch_pack(kv, d_ids, n, d_buf, unpack, stream);
    if (st == LP_OK && !unpack) e = cudaMemcpyAsync(host, d_buf, bytes, cudaMemcpyDeviceToHost, stream);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (st == LP_OK && e != cudaSuccess)
    st = LP_FAIL(LP_ERR_CUDA, "kv %s of %d blocks: %s", unpack ? "scatter" : "gather", n, cudaGetErrorString(e));
  cudaFree(d_ids);
  cudaFree(d_buf);
  return st;
}

}  // namespace

extern "C" lp_status lp_kv_create(lp_model *m, int32_t num_blocks, int32_t block_size, lp_kv **out_kv) {
  LP_REQUIRE(m && out_kv, "null model or out_kv");
  LP_REQUIRE(num_blocks > 0, "num_blocks=%d must be positive", num_blocks);
  LP_REQUIRE(block_size >= 16 && block_size <= 256 && (block_size & (block_size - 1)) == 0,
             "block_size=%d must be a power of two in [16, 256]", block_size);
  CUDA_CHECK(cudaSetDevice(m->device));
  lp_kv *kv = (lp_kv *)calloc(1, sizeof(lp_kv));
  if (!kv) return LP_FAIL(LP_ERR_OOM, "host allocation of the KV cache failed");
  kv->device = m->device;
  kv->num_layers = m->cfg.num_layers;
  kv->kv_heads = m->cfg.num_kv_heads;
  kv->head_dim = m->cfg.head_dim;
  kv->num_blocks = num_blocks;
  kv->block_size = block_size;
  while ((1 << kv->block_size_log2) < block_size) kv->block_size_log2++;
  kv->chunk_elems = (size_t)block_size * m->cfg.num_kv_heads * m->cfg.head_dim;
  kv->id = next_kv_id++;
  const size_t bytes = (size_t)num_blocks * block_bytes(kv);
  cudaError_t e = cudaMalloc((void **)&kv->data, bytes);
  if (e == cudaSuccess) e = cudaMemset(kv->data, 0, bytes);
  if (e != cudaSuccess) {
    cudaFree(kv->data);
    free(kv);
    return LP_FAIL(LP_ERR_OOM, "KV cache of %d blocks (%zu bytes): %s", num_blocks, bytes, cudaGetErrorString(e));
  }
  *out_kv = kv;
  return LP_OK;
}

extern "C" lp_status lp_kv_block_bytes(lp_kv *kv, int64_t *out_bytes) {
  LP_REQUIRE(kv && out_bytes, "null kv or out_bytes");
  *out_bytes = (int64_t)block_bytes(kv);
  return LP_OK;
}

extern "C" lp_status lp_kv_destroy(lp_kv *kv) {
  if (!kv) return LP_OK;
  cudaSetDevice(kv->device);
  cudaFree(kv->data);
  free(kv);
  return LP_OK;
}

extern "C" lp_status lp_kv_gather_host(lp_kv *kv, const int32_t *block_ids, int32_t n, void *dst) {
  LP_REQUIRE(kv, "null kv");
  return pack_host(kv, block_ids, n, dst, false);
}

extern "C" lp_status lp_kv_scatter_host(lp_kv *kv, const int32_t *block_ids, int32_t n, const void *src) {
  LP_REQUIRE(kv, "null kv");
  return pack_host(kv, block_ids, n, const_cast<void *>(src), true);
}
