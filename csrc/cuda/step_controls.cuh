// Packing of a step's sampling controls (see step_controls.cu).
#ifndef LP_CUDA_STEP_CONTROLS_CUH
#define LP_CUDA_STEP_CONTROLS_CUH
#include <stddef.h>

#include "model.cuh"
#include "step_meta.cuh"

// Entries the step's control lists hold (over all rows): a step with any is never a graph replay.
size_t controls_list_ints(const lp_step_batch &in);

// Writes the per-row controls into m->buf.meta_host (layout of `counts`, after step_pack flagged
// the skipped rows) and the lists into m->buf.lists_host (grown as needed); *out_list_ints is how
// many int32 to copy to m->buf.lists.
lp_status controls_pack(lp_model *m, const lp_step_batch &in, const StepCounts &counts, size_t *out_list_ints);

#endif
