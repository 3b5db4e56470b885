// The chunk copy kernel behind pack, unpack and kernel-driven peer copies. Block ids travel as a
// kernel parameter (no device id buffer, no extra copy before the launch); a CTA moves one 16 KiB
// tile of one chunk, loading all of its vectors before storing them so each thread keeps four
// 16-byte loads in flight, and a one-block transfer (56 chunks of the Qwen3-0.6B shape) still
// spreads over ~1800 CTAs.
#include <string.h>

#include "kv_chunk_copy.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr size_t kTileVec = (size_t)kThreads * kUnroll;

template <int CAP>
struct ChunkIds {
  int32_t src[CAP];
  int32_t dst[CAP];
};

__device__ __forceinline__ uint4 *chunk_ptr(const ChunkEnd &e, int ls, int i, int32_t id, int64_t local_c,
                                            size_t chunk_vec) {
  if (e.indexed) return e.base + ((size_t)ls * e.num_blocks + id) * chunk_vec;
  return e.base + (size_t)local_c * chunk_vec;
}

// grid.x: chunks of this launch; grid.y: tiles per chunk.
template <int CAP>
__global__ void __launch_bounds__(kThreads)
    chunk_copy_kernel(ChunkEnd src, ChunkEnd dst, const __grid_constant__ ChunkIds<CAP> ids, int n,
                      size_t chunk_vec, int64_t first_chunk) {
  const int64_t c = first_chunk + blockIdx.x;
  const int ls = (int)(c / n), i = (int)(c % n);
  const uint4 *s = chunk_ptr(src, ls, i, ids.src[i], blockIdx.x, chunk_vec);
  uint4 *d = chunk_ptr(dst, ls, i, ids.dst[i], blockIdx.x, chunk_vec);
  const size_t v0 = (size_t)blockIdx.y * kTileVec + threadIdx.x;
  uint4 r[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const size_t v = v0 + (size_t)u * kThreads;
    if (v < chunk_vec) r[u] = __ldcs(s + v);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const size_t v = v0 + (size_t)u * kThreads;
    if (v < chunk_vec) __stcs(d + v, r[u]);
  }
}

template <int CAP>
lp_status launch(const ChunkEnd &src, const ChunkEnd &dst, const int32_t *src_ids, const int32_t *dst_ids, int n,
                 size_t chunk_vec, int64_t first_chunk, int64_t num_chunks, cudaStream_t stream) {
  ChunkIds<CAP> ids;
  memcpy(ids.src, src_ids ? src_ids : dst_ids, (size_t)n * sizeof(int32_t));
  memcpy(ids.dst, dst_ids ? dst_ids : src_ids, (size_t)n * sizeof(int32_t));
  const size_t tiles = (chunk_vec + kTileVec - 1) / kTileVec;
  LP_REQUIRE(tiles <= 65535, "chunk of %zu bytes is too large for one launch", chunk_vec * 16);
  // grid.x is limited to 2^31 - 1 chunks; a packed transfer never comes near it.
  const dim3 grid((unsigned)num_chunks, (unsigned)tiles);
  chunk_copy_kernel<CAP><<<grid, kThreads, 0, stream>>>(src, dst, ids, n, chunk_vec, first_chunk);
  CUDA_CHECK_LAUNCH();
  return LP_OK;
}

}  // namespace

lp_status check_block_ids(const lp_kv *kv, const int32_t *ids, int n, const char *which) {
  LP_REQUIRE(kv, "%s KV cache handle is NULL", which);
  LP_REQUIRE(n > 0 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  LP_REQUIRE(ids, "%s block ids are NULL", which);
  for (int i = 0; i < n; i++)
    LP_REQUIRE(ids[i] >= 0 && ids[i] < kv->num_blocks, "%s block id %d (index %d) out of range [0, %d)", which,
               ids[i], i, kv->num_blocks);
  return LP_OK;
}

lp_status copy_chunks(const ChunkEnd &src, const ChunkEnd &dst, const int32_t *src_ids, const int32_t *dst_ids,
                      int n, size_t chunk_vec, int64_t first_chunk, int64_t num_chunks, cudaStream_t stream) {
  LP_REQUIRE(n > 0 && n <= LP_KV_MAX_TRANSFER_BLOCKS && num_chunks > 0 && chunk_vec > 0,
             "chunk copy of n=%d blocks, %lld chunks of %zu vectors", n, (long long)num_chunks, chunk_vec);
  LP_REQUIRE((src_ids || dst_ids) && (!src.indexed || src_ids) && (!dst.indexed || dst_ids),
             "chunk copy needs block ids for each indexed end");
  // The smallest id capacity that fits keeps the parameter block (and launch cost) small.
  if (n <= 32) return launch<32>(src, dst, src_ids, dst_ids, n, chunk_vec, first_chunk, num_chunks, stream);
  if (n <= 256) return launch<256>(src, dst, src_ids, dst_ids, n, chunk_vec, first_chunk, num_chunks, stream);
  return launch<LP_KV_MAX_TRANSFER_BLOCKS>(src, dst, src_ids, dst_ids, n, chunk_vec, first_chunk, num_chunks, stream);
}
