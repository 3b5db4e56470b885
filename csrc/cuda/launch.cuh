// Programmatic dependent launch (PDL) for the step's kernels. Each launches with the
// programmatic-stream-serialization attribute, so its CTAs may start while the previous kernel
// drains: a kernel calls pdl_trigger() first (letting its own successor be scheduled early), may
// then do work that depends on nothing the predecessors write (weight prefetch into L2), and
// calls pdl_wait() before reading or writing any buffer a predecessor touches. griddepcontrol.wait
// returns once the predecessor grid has completed and its writes are visible, and that grid
// waited on its own predecessor, so ordering is transitive. Without the attribute (or under
// LMPOOL_CUDA_PDL=0) both instructions are no-ops and launches are ordinary.
#ifndef LP_CUDA_LAUNCH_CUH
#define LP_CUDA_LAUNCH_CUH
#include <utility>

#include "cuda_check.h"

__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Pulls [p, p + bytes) into L2 without waiting (bytes a multiple of 16, p 16-byte aligned).
__device__ __forceinline__ void prefetch_l2(const void *p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// Whether kernels launch with PDL (LMPOOL_CUDA_PDL=0 turns it off; read once).
bool pdl_enabled();

// `cluster`: thread block cluster dimensions (1, 1, 1: no clusters).
template <typename... KernelArgs, typename... Args>
lp_status launch_kernel_clustered(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, dim3 cluster, size_t smem,
                                  cudaStream_t stream, Args &&...args) {
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x, attr[n].val.clusterDim.y = cluster.y, attr[n++].val.clusterDim.z = cluster.z;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  return LP_OK;
}

template <typename... KernelArgs, typename... Args>
lp_status launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        Args &&...args) {
  return launch_kernel_clustered(kernel, grid, block, dim3(1, 1, 1), smem, stream, std::forward<Args>(args)...);
}

#endif
