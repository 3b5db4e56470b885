/* RoPE inverse frequencies on the host, shared by both builds: inv_freq[i] = theta^(-2i/head_dim)
 * for i < head_dim / 2, adjusted as transformers' _compute_llama3_parameters for rope_type llama3. */
#ifndef LP_ROPE_FREQ_H
#define LP_ROPE_FREQ_H
#include <math.h>

#include "../include/lmpool.h"

static inline void lp_rope_inv_freq(const lp_model_config *c, float *inv_freq) {
  const int32_t half = c->head_dim / 2;
  const double pi = 3.14159265358979323846;
  for (int32_t i = 0; i < half; i++) {
    double f = 1.0 / pow((double)c->rope_theta, (double)(2 * i) / (double)c->head_dim);
    if (c->rope_type == LP_ROPE_LLAMA3) {
      /* Wavelengths shorter than original_max/high_freq_factor keep their frequency, longer than
       * original_max/low_freq_factor are divided by factor, and the band between interpolates. */
      const double old_ctx = c->rope_original_max_position, factor = c->rope_factor;
      const double low = c->rope_low_freq_factor, high = c->rope_high_freq_factor;
      const double wavelen = 2.0 * pi / f;
      if (wavelen > old_ctx / low) {
        f = f / factor;
      } else if (wavelen >= old_ctx / high) {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = (1.0 - smooth) * f / factor + smooth * f;
      }
    }
    inv_freq[i] = (float)f;
  }
}

#endif
