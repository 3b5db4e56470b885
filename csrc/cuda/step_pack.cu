// Argument checks and metadata packing of lp_step (host code).
#include <string.h>

#include <algorithm>
#include <vector>

#include "../common/sampling_controls.h"
#include "../common/sampling_row_check.h"
#include "step_pack.cuh"

lp_status step_validate(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, StepCounts *counts,
                        bool *pure_decode) {
  // Messages follow the CPU build's, so callers see the same errors on either backend.
  const int S = in.num_seqs, T = in.num_tokens, R = in.num_rows;
  LP_REQUIRE(T >= 0 && T <= m->max_tokens, "num_tokens=%d exceeds max_num_tokens=%d given to finalize", T,
             m->max_tokens);
  LP_REQUIRE(S >= 0 && S <= T, "num_seqs=%d must be in [0, num_tokens=%d]", S, T);
  LP_REQUIRE(T == 0 || S > 0, "num_tokens=%d but num_seqs=0", T);
  LP_REQUIRE(S <= m->max_seqs, "num_seqs=%d exceeds max_num_seqs=%d given to finalize", S, m->max_seqs);
  LP_REQUIRE(R >= 0 && R <= m->max_seqs, "num_rows=%d exceeds max_num_seqs=%d given to finalize", R, m->max_seqs);
  LP_REQUIRE(T == 0 || (in.token_ids && in.positions && in.slot_mapping && in.query_start && in.context_lens &&
                        in.block_tables),
             "null batch array");
  LP_REQUIRE(R == 0 || in.sample_index, "null sampling array");
  LP_REQUIRE(in.defer_sampling == 0 || in.defer_sampling == 1, "defer_sampling=%d must be 0 or 1",
             in.defer_sampling);
  const int vocab = m->cfg.vocab_size, bs = kv->block_size;
  const int64_t slots = (int64_t)kv->num_blocks * bs;
  int stride = 0, tiles = 0, decode = 0;
  if (T > 0) {
    LP_REQUIRE(in.max_blocks_per_seq > 0, "max_blocks_per_seq=%d must be positive", in.max_blocks_per_seq);
    for (int t = 0; t < T; t++) {
      LP_REQUIRE(in.token_ids[t] >= 0 && in.token_ids[t] < vocab,
                 "token %d: token id %d out of range [0, vocab_size=%d)", t, in.token_ids[t], vocab);
      LP_REQUIRE(in.positions[t] >= 0, "token %d: position %d is negative", t, in.positions[t]);
      LP_REQUIRE(in.slot_mapping[t] >= 0 && in.slot_mapping[t] < slots,
                 "token %d: slot %d out of range [0, %lld) (%d blocks x %d)", t, in.slot_mapping[t],
                 (long long)slots, kv->num_blocks, bs);
    }
    LP_REQUIRE(in.query_start[0] == 0, "query_start[0]=%d must be 0", in.query_start[0]);
    LP_REQUIRE(in.query_start[S] == T, "query_start[num_seqs=%d]=%d must equal num_tokens=%d", S,
               in.query_start[S], T);
    for (int s = 0; s < S; s++) {
      const int ql = in.query_start[s + 1] - in.query_start[s], cl = in.context_lens[s];
      LP_REQUIRE(ql >= 1, "sequence %d has query_len %d (query_start %d..%d); must be >= 1", s, ql,
                 in.query_start[s], in.query_start[s + 1]);
      LP_REQUIRE(cl >= ql, "sequence %d: context_len %d < query_len %d", s, cl, ql);
      const int nb = (int)(((int64_t)cl + bs - 1) / bs);
      LP_REQUIRE(nb <= in.max_blocks_per_seq,
                 "sequence %d: context_len %d needs %d blocks of %d, max_blocks_per_seq is %d", s, cl, nb, bs,
                 in.max_blocks_per_seq);
      const int32_t *row = in.block_tables + (size_t)s * in.max_blocks_per_seq;
      for (int j = 0; j < nb; j++)
        LP_REQUIRE(row[j] >= 0 && row[j] < kv->num_blocks,
                   "sequence %d: block id %d (block_tables[%d][%d]) out of range [0, %d)", s, row[j], s, j,
                   kv->num_blocks);
      // Attention reads this step's K/V back through the block table, so the slots written must be
      // the ones the table names.
      for (int t = in.query_start[s]; t < in.query_start[s + 1]; t++) {
        const int c = cl - ql + (t - in.query_start[s]);
        const int64_t slot = (int64_t)row[c / bs] * bs + c % bs;
        LP_REQUIRE(in.slot_mapping[t] == slot,
                   "token %d (sequence %d, context index %d): slot_mapping %d, but the block table puts it at slot %lld",
                   t, s, c, in.slot_mapping[t], (long long)slot);
      }
      stride = std::max(stride, nb);
      if (ql == 1) decode++;
      else tiles += (ql + LP_PREFILL_TILE - 1) / LP_PREFILL_TILE;
    }
  }
  LP_REQUIRE((int64_t)S * stride <= m->block_table_cap,
             "block tables need %lld entries (%d sequences x %d blocks), capacity %d", (long long)S * stride, S,
             stride, m->block_table_cap);
  LP_REQUIRE(tiles <= m->prefill_tile_cap, "prefill needs %d tiles, capacity %d", tiles, m->prefill_tile_cap);
  bool in_order = T > 0 && R == S && T == S;
  for (int r = 0; r < R; r++) {
    LP_REQUIRE(in.sample_index[r] >= 0 && in.sample_index[r] < T, "row %d: sample_index %d out of range [0, num_tokens=%d)",
               r, in.sample_index[r], T);
    if (in.sample_index[r] != r) in_order = false;
  }
  *counts = StepCounts{T, S, R, decode, tiles, stride};
  *pure_decode = in_order;
  return LP_OK;
}

lp_status step_validate_sampling(const lp_model *m, const lp_step_batch &in) {
  const int R = in.num_rows;
  LP_REQUIRE(R == 0 || (in.sample_index && in.temperature && in.top_k && in.top_p && in.seed),
             "null sampling array");
  LP_REQUIRE(R == 0 || (in.out_tokens && in.out_logprobs), "null output array");
  return lp_check_control_arrays(&in, m->cfg.vocab_size);
}

namespace {

// Query tiles of the multi-token sequences, those with the most keys first (shorter tail).
void fill_tiles(const lp_step_batch &in, int32_t *out) {
  struct Tile { int seq, q0, keys; };
  std::vector<Tile> tiles;
  for (int s = 0; s < in.num_seqs; s++) {
    const int ql = in.query_start[s + 1] - in.query_start[s];
    if (ql == 1) continue;
    for (int q0 = 0; q0 < ql; q0 += LP_PREFILL_TILE)
      tiles.push_back({s, q0, in.context_lens[s] - ql + std::min(q0 + LP_PREFILL_TILE, ql)});
  }
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile &a, const Tile &b) { return a.keys > b.keys; });
  for (size_t i = 0; i < tiles.size(); i++) out[2 * i] = tiles[i].seq, out[2 * i + 1] = tiles[i].q0;
}

}  // namespace

size_t step_pack(const lp_model *m, const lp_kv *kv, const lp_step_batch &in, const StepCounts &c) {
  const StepLayout l = step_layout(c);
  uint8_t *h = m->buf.meta_host;
  const int S = in.num_seqs, T = in.num_tokens, R = in.num_rows;
  int32_t *header = (int32_t *)(h + l.header);
  memset(header, 0, META_HEADER_INTS * 4);
  header[META_BT_STRIDE] = c.bt_stride;
  auto put = [&](size_t off, const void *src, size_t n, size_t elem) {
    if (n) memcpy(h + off, src, n * elem);
  };
  put(l.tokens, in.token_ids, T, 4);
  put(l.positions, in.positions, T, 4);
  put(l.slots, in.slot_mapping, T, 4);
  put(l.query_start, in.query_start, S + 1, 4);
  put(l.context_lens, in.context_lens, S, 4);
  put(l.sample_index, in.sample_index, R, 4);
  // Padding of a graph batch: inert sequences with one token each, sampled greedily.
  for (int i = T; i < c.tokens; i++) {
    ((int32_t *)(h + l.tokens))[i] = 0;
    ((int32_t *)(h + l.positions))[i] = 0;
    ((int32_t *)(h + l.slots))[i] = -1;
  }
  for (int s = S; s < c.seqs; s++) {
    ((int32_t *)(h + l.query_start))[s + 1] = T + (s - S) + 1;
    ((int32_t *)(h + l.context_lens))[s] = 0;
  }
  for (int r = R; r < c.rows; r++) ((int32_t *)(h + l.sample_index))[r] = r;
  int32_t *decode = (int32_t *)(h + l.decode_seqs);
  int nd = 0;
  for (int s = 0; s < c.seqs && nd < c.decode_seqs; s++)
    if (s >= S || in.query_start[s + 1] - in.query_start[s] == 1) decode[nd++] = s;
  if (c.prefill_tiles) fill_tiles(in, (int32_t *)(h + l.prefill_tiles));
  int32_t *bt = (int32_t *)(h + l.block_tables);
  if (c.bt_stride) {
    memset(bt, 0, (size_t)c.seqs * c.bt_stride * 4);
    for (int s = 0; s < S; s++) {
      const int nb = (in.context_lens[s] + kv->block_size - 1) / kv->block_size;
      memcpy(bt + (size_t)s * c.bt_stride, in.block_tables + (size_t)s * in.max_blocks_per_seq, (size_t)nb * 4);
    }
  }
  return l.total;
}

void step_pack_rows(const lp_model *m, const lp_step_batch &in, const StepCounts &c, int *out_skipped) {
  const StepLayout l = step_layout(c);
  uint8_t *h = m->buf.meta_host;
  const int R = in.num_rows;
  auto put = [&](size_t off, const void *src, size_t n, size_t elem) {
    if (n) memcpy(h + off, src, n * elem);
  };
  put(l.seed, in.seed, R, 8);
  put(l.top_k, in.top_k, R, 4);
  put(l.temperature, in.temperature, R, 4);
  put(l.top_p, in.top_p, R, 4);
  // A row with invalid sampling parameters or controls runs greedily without controls (the
  // kernels need no case for it) and is flagged: lp_step_collect reports it as not sampled (token
  // -1, logprob NaN, no top logprobs).
  int skipped = 0;
  for (int r = 0; r < R; r++) {
    lp_row_controls rc;
    lp_row_controls_of(&in, r, &rc);
    const bool ok = lp_sampling_row_ok(in.temperature[r], in.top_p[r]) &&
                    lp_row_controls_ok(&rc, m->cfg.vocab_size, in.max_top_logprobs);
    m->buf.row_skipped[r] = !ok;
    if (ok) continue;
    skipped++;
    ((int32_t *)(h + l.top_k))[r] = 0;
    ((float *)(h + l.temperature))[r] = 0.f;
    ((float *)(h + l.top_p))[r] = 1.f;
  }
  *out_skipped = skipped;
  for (int r = R; r < c.rows; r++) {  // a graph batch's padding rows: greedy
    ((uint64_t *)(h + l.seed))[r] = 0;
    ((int32_t *)(h + l.top_k))[r] = 0;
    ((float *)(h + l.temperature))[r] = 0.f;
    ((float *)(h + l.top_p))[r] = 1.f;
  }
}
