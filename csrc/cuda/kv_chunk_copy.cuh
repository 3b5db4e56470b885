// Copies KV chunks (one block of one layer's K or V) between a paged KV tensor addressed through
// block ids and a packed buffer, or between two KV tensors (possibly on another GPU over NVLink).
// Chunks are numbered in packed order: c = (layer * 2 + side) * n + i for the i-th listed block.
#ifndef LP_CUDA_KV_CHUNK_COPY_CUH
#define LP_CUDA_KV_CHUNK_COPY_CUH
#include "../common/kv_transfer_rules.h"
#include "model.cuh"

// One end of a chunk copy.
struct ChunkEnd {
  uint4 *base;     // KV data, or the packed buffer holding chunk first_chunk at offset 0
  int num_blocks;  // KV: blocks per (layer, side) plane
  bool indexed;    // true: a KV tensor addressed through block ids; false: packed
};

// A KV tensor as a chunk end.
static inline ChunkEnd kv_end(const lp_kv *kv) { return ChunkEnd{(uint4 *)kv->data, kv->num_blocks, true}; }
// A packed buffer as a chunk end.
static inline ChunkEnd packed_end(void *buf) { return ChunkEnd{(uint4 *)buf, 0, false}; }

// 16-byte vectors per chunk.
static inline size_t kv_chunk_vec(const lp_kv *kv) { return kv->chunk_elems * sizeof(bf16) / sizeof(uint4); }
static inline size_t kv_chunk_bytes(const lp_kv *kv) { return kv->chunk_elems * sizeof(bf16); }

// Checks n and that every id is a block of kv (ids are host memory).
lp_status check_block_ids(const lp_kv *kv, const int32_t *ids, int n, const char *which);

// Copies chunks [first_chunk, first_chunk + num_chunks) of an n-block transfer from src to dst on
// `stream`. Indexed ends use src_ids / dst_ids (host arrays of n ids, passed by value to the
// kernel). Ids must have been checked.
lp_status copy_chunks(const ChunkEnd &src, const ChunkEnd &dst, const int32_t *src_ids, const int32_t *dst_ids,
                      int n, size_t chunk_vec, int64_t first_chunk, int64_t num_chunks, cudaStream_t stream);

#endif
