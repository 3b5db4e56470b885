/* lp_step_batch_layout: the struct's size and field offsets as text, so the FFI's packer
 * (ffi/step_batch.ts) can be checked against what this compiler laid out. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lp_error.h"

#define LP_FIELD(name) {#name, offsetof(lp_step_batch, name)}

/* Every field of lp_step_batch in declaration order. */
static const struct {
  const char *name;
  size_t offset;
} fields[] = {
    LP_FIELD(num_seqs),     LP_FIELD(num_tokens),   LP_FIELD(max_blocks_per_seq), LP_FIELD(num_rows),
    LP_FIELD(max_top_logprobs), LP_FIELD(defer_sampling),
    LP_FIELD(token_ids),    LP_FIELD(positions),    LP_FIELD(slot_mapping),       LP_FIELD(query_start),
    LP_FIELD(context_lens), LP_FIELD(block_tables), LP_FIELD(sample_index),       LP_FIELD(temperature),
    LP_FIELD(top_k),        LP_FIELD(top_p),        LP_FIELD(seed),               LP_FIELD(out_tokens),
    LP_FIELD(out_logprobs), LP_FIELD(out_logits),
    LP_FIELD(min_p), LP_FIELD(presence_penalty), LP_FIELD(frequency_penalty), LP_FIELD(repetition_penalty),
    LP_FIELD(penalty_start), LP_FIELD(penalty_token_ids), LP_FIELD(penalty_counts), LP_FIELD(bias_start),
    LP_FIELD(bias_token_ids), LP_FIELD(bias_values), LP_FIELD(allowed_start), LP_FIELD(allowed_token_ids),
    LP_FIELD(banned_start), LP_FIELD(banned_token_ids), LP_FIELD(score_token_ids), LP_FIELD(top_logprobs),
    LP_FIELD(out_top_token_ids), LP_FIELD(out_top_logprobs), LP_FIELD(out_ranks),
};

/* The table above lists 6 counts (8-byte aligned as they are) and 33 pointers; a field added to
 * the struct must be added there (and to ffi/step_batch.ts) too. */
_Static_assert(sizeof(lp_step_batch) == 6 * sizeof(int32_t) + 33 * sizeof(void *),
               "lp_step_batch changed: update the fields table and ffi/step_batch.ts");

int32_t lp_step_batch_layout(char *buf, int32_t cap) {
  char text[2048];
  int len = snprintf(text, sizeof text, "size=%zu", sizeof(lp_step_batch));
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    len += snprintf(text + len, sizeof text - (size_t)len, " %s@%zu", fields[i].name, fields[i].offset);
  if (buf && cap > 0) {
    const size_t n = (size_t)len < (size_t)cap - 1 ? (size_t)len : (size_t)cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
  }
  return (int32_t)len;
}
