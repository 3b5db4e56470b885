// The forward step as a sequence of launches on the model's stream (used eagerly and for graph
// capture alike).
#ifndef LP_CUDA_FORWARD_CUH
#define LP_CUDA_FORWARD_CUH
#include "model.cuh"
#include "step_meta.cuh"

// Enqueues embedding, every layer, the LM head on the sample rows and sampling. Results land in
// m->buf.sample_out: tokens at [0, rows), logprob bits at [rows, 2 rows); logits in m->buf.logits.
// It is the two halves below, one after the other.
lp_status forward_enqueue(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm);

// The forward pass up to the logits of the sample rows (m->buf.logits, and the LM head GEMV's row
// stats), which a deferred step enqueues before its controls are known.
lp_status forward_logits_enqueue(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm);
// The sampling of those rows, reading the rows' values and controls from the device metadata.
lp_status sampling_enqueue(lp_model *m, const StepCounts &c, const StepMeta &dm);

// Enqueues the copies of the sampled rows' outputs to the pinned host buffers and notes where
// lp_step_collect puts them (the batch's output arrays).
lp_status step_outputs_enqueue(lp_model *m, const lp_step_batch &in, const StepCounts &c);

// Runs each GEMM shape forward_enqueue can use once and waits (gemm_warmup.cu); after workspaces.
lp_status gemm_warmup(lp_model *m);

#endif
