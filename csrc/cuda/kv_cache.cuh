// Device-side packing of KV blocks for transfers: n blocks of every layer, K and V, to/from one
// contiguous [L, 2, n, block_size, kv_heads, head_dim] buffer (the NCCL transfer unit).
#ifndef LP_CUDA_KV_CACHE_CUH
#define LP_CUDA_KV_CACHE_CUH
#include "model.cuh"

// Block ids are device memory and must be valid (the host entry points check them).
lp_status kv_pack_device(const LpKvCache *kv, const int32_t *block_ids, int n, void *dst,
                         cudaStream_t stream);
lp_status kv_unpack_device(LpKvCache *kv, const int32_t *block_ids, int n, const void *src,
                           cudaStream_t stream);

#endif
