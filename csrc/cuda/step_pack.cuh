// Host side of a step: argument checks and packing of the metadata into the pinned staging
// buffer (see step_meta.cuh for the layout).
#ifndef LP_CUDA_STEP_PACK_CUH
#define LP_CUDA_STEP_PACK_CUH
#include "model.cuh"
#include "step_meta.cuh"

// Checks what the forward pass reads against the model's limits and the cache; fills the eager
// layout's counts. *pure_decode says whether it is the shape decode graphs serve (one token per
// sequence, each sampled in order).
lp_status step_validate(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, StepCounts *counts,
                        bool *pure_decode);

// Checks what the sampling reads: its per-row arrays, the outputs and the control arrays.
lp_status step_validate_sampling(const lp_model *m, const lp_step_batch &in);

// Packs what the forward pass reads into m->buf.meta_host for `counts` (the header's block-table
// stride, tokens, sequences, sample_index, decode list, tiles, block tables). When counts.seqs
// exceeds in.num_seqs (a padded graph batch) the extra sequences are inert: no K/V write, no
// context. Returns the number of bytes to copy.
size_t step_pack(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, const StepCounts &counts);

// Packs the rows' sampling values (seed, top_k, temperature, top_p; greedy padding rows). Rows with
// invalid sampling parameters (lp_sampling_row_ok, lp_row_controls_ok) are packed as greedy rows
// and flagged in m->buf.row_skipped (controls_pack then gives them no controls); *out_skipped
// counts them. A deferred step packs these (and the controls) after its forward pass was enqueued:
// they lie in [layout.seed, layout.tokens) and [layout.top_k, layout.decode_seqs), apart from
// every array the forward pass reads.
void step_pack_rows(const lp_model *m, const lp_step_batch &in, const StepCounts &counts, int *out_skipped);

#endif
