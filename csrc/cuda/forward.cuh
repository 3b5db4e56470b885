// The forward step as a sequence of launches on the model's stream (used eagerly and for graph
// capture alike).
#ifndef LP_CUDA_FORWARD_CUH
#define LP_CUDA_FORWARD_CUH
#include "model.cuh"
#include "step_meta.cuh"

// Enqueues embedding, every layer, the LM head on the sample rows and sampling. Results land in
// m->buf.sample_out: tokens at [0, rows), logprob bits at [rows, 2 rows); logits in m->buf.logits.
lp_status forward_enqueue(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm);

// Runs each GEMM shape forward_enqueue can use once and waits (gemm_warmup.cu); after workspaces.
lp_status gemm_warmup(lp_model *m);

#endif
