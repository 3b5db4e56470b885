/* lp_step of both backends: lp_step_launch, then lp_step_collect waiting for the end. */
#include "lp_error.h"

lp_status lp_step(lp_model *model, lp_kv *kv, const lp_step_batch *batch) {
  /* Its sampling would wait for a call lp_step never makes. */
  LP_REQUIRE(!batch || batch->defer_sampling == 0, "lp_step with defer_sampling=%d (use lp_step_launch)",
             batch->defer_sampling);
  LP_TRY(lp_step_launch(model, kv, batch));
  int32_t done = 0;
  return lp_step_collect(model, 1, &done);
}
