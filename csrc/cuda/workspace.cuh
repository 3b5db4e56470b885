// Step workspaces of a finalized model: device buffers, pinned staging, cuBLAS workspace, RoPE
// table. Allocated once at finalize so a step never allocates.
#ifndef LP_CUDA_WORKSPACE_CUH
#define LP_CUDA_WORKSPACE_CUH
#include "model.cuh"

lp_status workspace_alloc(lp_model *m);
// Frees whatever was allocated (safe on a partially allocated workspace).
void workspace_free(lp_model *m);

#endif
