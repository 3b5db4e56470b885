/* Weight kinds as both builds name them (so error messages agree across backends), and which are
 * global rather than per layer. */
#ifndef LP_WEIGHT_KINDS_H
#define LP_WEIGHT_KINDS_H
#include <stdint.h>

#include "../include/lmpool.h"

/* The kind's name, or NULL for a value that is no weight kind. */
static inline const char *lp_weight_kind_name(int32_t kind) {
  switch (kind) {
  case LP_W_EMBED: return "embed";
  case LP_W_FINAL_NORM: return "final_norm";
  case LP_W_LM_HEAD: return "lm_head";
  case LP_W_INPUT_NORM: return "input_norm";
  case LP_W_Q: return "q";
  case LP_W_K: return "k";
  case LP_W_V: return "v";
  case LP_W_O: return "o";
  case LP_W_Q_NORM: return "q_norm";
  case LP_W_K_NORM: return "k_norm";
  case LP_W_POST_NORM: return "post_norm";
  case LP_W_GATE: return "gate";
  case LP_W_UP: return "up";
  case LP_W_DOWN: return "down";
  default: return 0;
  }
}

/* Whether the kind is one of the model-wide weights (embed, final_norm, lm_head; layer -1). */
static inline int lp_weight_kind_is_global(int32_t kind) { return kind >= LP_W_EMBED && kind <= LP_W_LM_HEAD; }

#endif
