// Host side of a step: argument checks and packing of the metadata into the pinned staging
// buffer (see step_meta.cuh for the layout).
#ifndef LP_CUDA_STEP_PACK_CUH
#define LP_CUDA_STEP_PACK_CUH
#include "model.cuh"
#include "step_meta.cuh"

// Checks the step against the model's limits and the cache; fills the eager layout's counts.
// *pure_decode says whether it is the shape decode graphs serve (one token per sequence, each
// sampled in order).
lp_status step_validate(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, StepCounts *counts,
                        bool *pure_decode);

// Packs the step into m->buf.meta_host for `counts`. When counts.seqs exceeds in.num_seqs (a
// padded graph batch) the extra sequences are inert: no K/V write, no context, greedy rows.
// Rows with invalid sampling parameters (lp_sampling_row_ok, lp_row_controls_ok) are packed as
// greedy rows and flagged in m->buf.row_skipped (controls_pack then gives them no controls); *out_skipped counts them. Returns the number of bytes to copy.
size_t step_pack(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, const StepCounts &counts,
                 int *out_skipped);

#endif
