// Host side of a step's sampling controls (lmpool.h): per-row values into the metadata (fixed
// offsets, so a decode graph reads them too) and the variable-length lists (penalties, bias,
// allowed and banned tokens) into one list buffer copied next to the metadata. The kernels find
// each list through the header. Steps with list entries never replay a decode graph (see
// forward.cu), so the list buffer may move when it grows.
#include <string.h>

#include "../common/sampling_controls.h"
#include "step_controls.cuh"

namespace {

// Defaults of a row without controls (or one skipped for invalid values).
lp_row_controls no_controls() {
  lp_row_controls c;
  memset(&c, 0, sizeof c);
  c.repetition = 1.f;
  c.score_token = -1;
  return c;
}

lp_status reserve_lists(lp_model *m, size_t ints) {
  StepBuffers &b = m->buf;
  if (ints <= b.lists_cap) return LP_OK;
  size_t cap = b.lists_cap ? b.lists_cap : 4096;
  while (cap < ints) cap *= 2;
  // The previous step was collected, so nothing on the stream reads the old buffers.
  cudaFree(b.lists);
  cudaFreeHost(b.lists_host);
  b.lists = nullptr, b.lists_host = nullptr, b.lists_cap = 0;
  cudaError_t e = cudaMalloc((void **)&b.lists, cap * sizeof(int32_t));
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_OOM, "cudaMalloc of control lists (%zu ints): %s", cap, cudaGetErrorString(e));
  e = cudaMallocHost((void **)&b.lists_host, cap * sizeof(int32_t));
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_OOM, "cudaMallocHost of control lists (%zu ints): %s", cap, cudaGetErrorString(e));
  b.lists_cap = cap;
  return LP_OK;
}

}  // namespace

size_t controls_list_ints(const lp_step_batch &in) {
  const int R = in.num_rows;
  size_t n = 0;
  if (R == 0) return 0;
  if (in.penalty_start) n += 2 * (size_t)in.penalty_start[R];
  if (in.bias_start) n += 2 * (size_t)in.bias_start[R];
  if (in.allowed_start) n += (size_t)in.allowed_start[R];
  if (in.banned_start) n += (size_t)in.banned_start[R];
  return n;
}

lp_status controls_pack(lp_model *m, const lp_step_batch &in, const StepCounts &c, size_t *out_list_ints) {
  const StepLayout l = step_layout(c);
  uint8_t *h = m->buf.meta_host;
  const int R = in.num_rows;
  // List sizes over the rows that are sampled (a skipped row's lists are not read).
  size_t np = 0, nb = 0, na = 0, nn = 0;
  for (int r = 0; r < R; r++) {
    if (m->buf.row_skipped[r]) continue;
    lp_row_controls rc;
    lp_row_controls_of(&in, r, &rc);
    np += (size_t)rc.n_penalty, nb += (size_t)rc.n_bias, na += (size_t)rc.n_allowed, nn += (size_t)rc.n_banned;
  }
  const size_t total = 2 * np + 2 * nb + na + nn;
  if (total > 0) LP_TRY(reserve_lists(m, total));
  LP_REQUIRE(total <= 0x7fffffff, "control lists hold %zu entries, more than an int32 offset reaches", total);
  int32_t *header = (int32_t *)(h + l.header);
  header[META_TOP_STRIDE] = in.max_top_logprobs;
  header[META_PENALTY_IDS] = 0;
  header[META_PENALTY_COUNTS] = (int32_t)np;
  header[META_BIAS_IDS] = (int32_t)(2 * np);
  header[META_BIAS_VALUES] = (int32_t)(2 * np + nb);
  header[META_ALLOWED_IDS] = (int32_t)(2 * np + 2 * nb);
  header[META_BANNED_IDS] = (int32_t)(2 * np + 2 * nb + na);
  int32_t *flags = (int32_t *)(h + l.row_flags), *top = (int32_t *)(h + l.top_logprobs);
  int32_t *score = (int32_t *)(h + l.score_token);
  float *min_p = (float *)(h + l.min_p), *pres = (float *)(h + l.presence), *freq = (float *)(h + l.frequency);
  float *rep = (float *)(h + l.repetition);
  int32_t *ps = (int32_t *)(h + l.penalty_start), *bs = (int32_t *)(h + l.bias_start);
  int32_t *as = (int32_t *)(h + l.allowed_start), *ns = (int32_t *)(h + l.banned_start);
  int32_t *lists = m->buf.lists_host;
  size_t op = 0, ob = 0, oa = 0, on = 0;
  ps[0] = bs[0] = as[0] = ns[0] = 0;
  for (int r = 0; r < c.rows; r++) {  // c.rows >= R: a graph batch pads with rows without controls
    lp_row_controls rc = no_controls();
    if (r < R && !m->buf.row_skipped[r]) lp_row_controls_of(&in, r, &rc);
    flags[r] = lp_row_controls_process(&rc) ? ROW_PROCESS : 0;
    top[r] = rc.top_logprobs, score[r] = rc.score_token;
    min_p[r] = rc.min_p, pres[r] = rc.presence, freq[r] = rc.frequency, rep[r] = rc.repetition;
    auto put = [&](size_t at, const void *src, int32_t n) {
      if (n > 0) memcpy(lists + at, src, (size_t)n * 4);
    };
    put(header[META_PENALTY_IDS] + op, rc.penalty_ids, rc.n_penalty);
    put(header[META_PENALTY_COUNTS] + op, rc.penalty_counts, rc.n_penalty);
    put(header[META_BIAS_IDS] + ob, rc.bias_ids, rc.n_bias);
    put(header[META_BIAS_VALUES] + ob, rc.bias_values, rc.n_bias);
    put(header[META_ALLOWED_IDS] + oa, rc.allowed_ids, rc.n_allowed);
    put(header[META_BANNED_IDS] + on, rc.banned_ids, rc.n_banned);
    op += (size_t)rc.n_penalty, ob += (size_t)rc.n_bias, oa += (size_t)rc.n_allowed, on += (size_t)rc.n_banned;
    ps[r + 1] = (int32_t)op, bs[r + 1] = (int32_t)ob, as[r + 1] = (int32_t)oa, ns[r + 1] = (int32_t)on;
  }
  *out_list_ints = total;
  return LP_OK;
}
