/* Paged causal attention of one layer, for prefill, chunked prefill and decode alike.
 *
 * Token t of sequence i is query j = t - query_start[i] of that sequence's step; it sees context
 * tokens 0 .. context_len - query_len + j, read through the block table. One work item is (token,
 * kv head): the heads that share a kv head (GQA) reuse each chunk of keys while it is in cache.
 * Softmax is online over fixed chunks of LP_ATTN_CHUNK keys, so the arithmetic does not depend on
 * the block size or on where blocks lie. */
#include <math.h>
#include <omp.h>

#include "cpu_math.h"
#include "cpu_model.h"

void cpu_attention(const lp_model *m, const lp_kv *kv, int32_t layer, const lp_step_batch *s) {
  const cpu_workspace *ws = &m->ws;
  const int64_t hd = m->cfg.head_dim, kvh = m->cfg.num_kv_heads;
  const int64_t group = m->cfg.num_heads / kvh, row = kvh * hd, bs = kv->block_size;
  const float scale = (float)(1.0 / sqrt((double)hd));
  const float *k_cache = cpu_kv_chunk(kv, 2 * (int64_t)layer, 0);
  const float *v_cache = cpu_kv_chunk(kv, 2 * (int64_t)layer + 1, 0);
  const int64_t items = (int64_t)s->num_tokens * kvh;
  int64_t keys = 0; /* query-key pairs of the step, for the parallel threshold */
  for (int32_t i = 0; i < s->num_seqs; i++) {
    const int64_t q = s->query_start[i + 1] - s->query_start[i];
    keys += q * (s->context_lens[i] - q) + q * (q + 1) / 2;
  }
  const int64_t work = keys * m->cfg.num_heads * hd * 2;

#pragma omp parallel for schedule(dynamic, 1) num_threads(ws->threads) \
    if (items > 1 && work >= LP_PARALLEL_MIN_WORK)
  for (int64_t item = 0; item < items; item++) {
    const int64_t t = item / kvh, g = item % kvh;
    const int32_t i = ws->token_seq[t];
    const int64_t q_start = s->query_start[i], q_len = s->query_start[i + 1] - q_start;
    const int64_t n_keys = s->context_lens[i] - q_len + (t - q_start) + 1;
    const int32_t *table = s->block_tables + (int64_t)i * s->max_blocks_per_seq;
    float *acc = ws->attn_scratch + (int64_t)omp_get_thread_num() * ws->attn_scratch_floats;
    float *run_max = acc + group * hd, *run_sum = run_max + group;
    for (int64_t x = 0; x < group * hd; x++) acc[x] = 0.f;
    for (int64_t hh = 0; hh < group; hh++) run_max[hh] = -INFINITY, run_sum[hh] = 0.f;

    for (int64_t c0 = 0; c0 < n_keys; c0 += LP_ATTN_CHUNK) {
      const int64_t cn = n_keys - c0 < LP_ATTN_CHUNK ? n_keys - c0 : LP_ATTN_CHUNK;
      const float *kp[LP_ATTN_CHUNK], *vp[LP_ATTN_CHUNK];
      for (int64_t c = 0; c < cn; c++) {
        const int64_t pos = c0 + c, slot = (int64_t)table[pos / bs] * bs + pos % bs;
        kp[c] = k_cache + slot * row + g * hd;
        vp[c] = v_cache + slot * row + g * hd;
      }
      for (int64_t hh = 0; hh < group; hh++) {
        const float *q = ws->qkv + t * m->qkv_dim + (g * group + hh) * hd;
        float *a = acc + hh * hd, score[LP_ATTN_CHUNK], chunk_max = -INFINITY;
        for (int64_t c = 0; c < cn; c++) {
          score[c] = lp_dot(q, kp[c], hd) * scale;
          chunk_max = score[c] > chunk_max ? score[c] : chunk_max;
        }
        if (chunk_max > run_max[hh]) { /* rescale what was accumulated under the old max */
          const float alpha = run_max[hh] == -INFINITY ? 0.f : lp_expf(run_max[hh] - chunk_max);
          for (int64_t d = 0; d < hd; d++) a[d] *= alpha;
          run_sum[hh] *= alpha;
          run_max[hh] = chunk_max;
        }
        for (int64_t c = 0; c < cn; c++) {
          const float p = lp_expf(score[c] - run_max[hh]);
          run_sum[hh] += p;
          for (int64_t d = 0; d < hd; d++) a[d] += p * vp[c][d];
        }
      }
    }
    for (int64_t hh = 0; hh < group; hh++) {
      float *out = ws->attn + t * m->q_dim + (g * group + hh) * hd;
      for (int64_t d = 0; d < hd; d++) out[d] = acc[hh * hd + d] / run_sum[hh];
    }
  }
}
