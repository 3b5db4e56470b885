// Validation patterns for transfer tests and the benchmark: fill blocks with the pattern of
// kv_transfer_rules.h and count the words that differ, on the device (a 256-block transfer of
// the Qwen3-0.6B shape is 7 GiB; host-side comparison would dominate the benchmark).
#include <string.h>

#include "kv_chunk_copy.cuh"
#include "transfer_context.cuh"

namespace {

constexpr int kThreads = 256;

struct PatternIds {
  int32_t id[LP_KV_MAX_TRANSFER_BLOCKS];
};

// grid.x: chunks in order (ls * n + i); grid.y: strides over the chunk's 16-byte vectors.
__global__ void __launch_bounds__(kThreads)
    pattern_kernel(uint4 *data, int num_blocks, const __grid_constant__ PatternIds ids, int n, size_t chunk_vec,
                   uint64_t seed, unsigned long long *mismatches) {
  const int ls = blockIdx.x / n, i = blockIdx.x % n;
  uint4 *chunk = data + ((size_t)ls * num_blocks + ids.id[i]) * chunk_vec;
  const uint64_t key = lp_kv_pattern_chunk_key(seed, i, ls);
  unsigned bad = 0;
  for (size_t v = (size_t)blockIdx.y * kThreads + threadIdx.x; v < chunk_vec; v += (size_t)gridDim.y * kThreads) {
    const uint4 want = make_uint4(lp_kv_pattern_word(key, v * 4), lp_kv_pattern_word(key, v * 4 + 1),
                                  lp_kv_pattern_word(key, v * 4 + 2), lp_kv_pattern_word(key, v * 4 + 3));
    if (!mismatches) {
      chunk[v] = want;
      continue;
    }
    const uint4 got = chunk[v];
    bad += (got.x != want.x) + (got.y != want.y) + (got.z != want.z) + (got.w != want.w);
  }
  if (mismatches) {
    bad = __reduce_add_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0 && bad) atomicAdd(mismatches, (unsigned long long)bad);
  }
}

lp_status run_pattern(const lp_kv *kv, const int32_t *ids, int n, uint64_t seed, int64_t *out_mismatches) {
  LP_TRY(check_block_ids(kv, ids, n, "pattern"));
  TransferContext *ctx;
  LP_TRY(transfer_context(kv->device, &ctx));
  std::lock_guard<std::mutex> lock(ctx->mu);
  CUDA_CHECK(cudaSetDevice(kv->device));
  PatternIds param;
  memcpy(param.id, ids, (size_t)n * sizeof(int32_t));
  unsigned long long *counter = nullptr;
  if (out_mismatches) {
    CUDA_CHECK(cudaMallocAsync((void **)&counter, sizeof *counter, ctx->pack));
    CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof *counter, ctx->pack));
  }
  const size_t chunk_vec = kv_chunk_vec(kv);
  const size_t strides = (chunk_vec + kThreads * 8 - 1) / (kThreads * 8);
  const dim3 grid((unsigned)(n * 2 * kv->num_layers), (unsigned)(strides < 65535 ? strides : 65535));
  pattern_kernel<<<grid, kThreads, 0, ctx->pack>>>((uint4 *)kv->data, kv->num_blocks, param, n, chunk_vec, seed,
                                                   counter);
  CUDA_CHECK_LAUNCH();
  if (out_mismatches) {
    unsigned long long host = 0;
    CUDA_CHECK(cudaMemcpyAsync(&host, counter, sizeof host, cudaMemcpyDeviceToHost, ctx->pack));
    CUDA_CHECK(cudaFreeAsync(counter, ctx->pack));
    CUDA_CHECK(cudaStreamSynchronize(ctx->pack));
    *out_mismatches = (int64_t)host;
  } else {
    CUDA_CHECK(cudaStreamSynchronize(ctx->pack));
  }
  return LP_OK;
}

}  // namespace

extern "C" lp_status lp_kv_fill_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed) {
  return run_pattern(kv, block_ids, n, seed, nullptr);
}

extern "C" lp_status lp_kv_check_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed,
                                         int64_t *out_mismatched_words) {
  LP_REQUIRE(out_mismatched_words, "out_mismatched_words is NULL");
  return run_pattern(kv, block_ids, n, seed, out_mismatched_words);
}
