/* Packing of the CPU build: blocks to and from a device buffer (host memory) in the packed
 * [L, 2, n, block_size, kv_heads, head_dim] layout, the segment rule, and the validation
 * pattern. Everything completes on return, so jobs are always NULL. */
#include <string.h>

#include "../common/kv_transfer_rules.h"
#include "cpu_transfer.h"

static int64_t chunk_bytes(const lp_kv *kv) { return kv->block_floats * (int64_t)sizeof(float); }

static lp_status check_pack_args(const lp_kv *kv, const lp_dev_buffer *b, int32_t n) {
  LP_REQUIRE(n >= 1 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  const int64_t need = (int64_t)n * 2 * kv->num_layers * chunk_bytes(kv);
  LP_REQUIRE(need <= b->bytes, "%d blocks need %lld bytes; the buffer has %lld", n, (long long)need,
             (long long)b->bytes);
  return LP_OK;
}

/* Checks kv, buf and n for a pack or unpack. */
static lp_status open_pack(const lp_kv *kv, const lp_dev_buffer *buf, int32_t n, lp_xfer_job **out_job) {
  LP_TRY(cpu_kv_check(kv));
  LP_TRY(cpu_buffer_check(buf));
  LP_TRY(check_pack_args(kv, buf, n));
  if (out_job) *out_job = NULL;
  return LP_OK;
}

lp_status lp_kv_pack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf, lp_xfer_job **out_job) {
  LP_TRY(open_pack(kv, buf, n, out_job));
  return lp_kv_gather_host(kv, block_ids, n, buf->data);
}

lp_status lp_kv_unpack(lp_kv *kv, const int32_t *block_ids, int32_t n, lp_dev_buffer *buf, lp_xfer_job **out_job) {
  LP_TRY(open_pack(kv, buf, n, out_job));
  return lp_kv_scatter_host(kv, block_ids, n, buf->data);
}

lp_status lp_kv_segment_bytes(lp_kv *kv, int32_t n, int64_t segment_bytes, int64_t *out_bytes) {
  LP_TRY(cpu_kv_check(kv));
  LP_REQUIRE(out_bytes && n > 0, "out_bytes is NULL or n=%d is not positive", n);
  const int64_t total = (int64_t)n * 2 * kv->num_layers;
  *out_bytes = lp_kv_segment_chunks(total, chunk_bytes(kv), segment_bytes) * chunk_bytes(kv);
  return LP_OK;
}

static lp_status check_ids(const lp_kv *kv, const int32_t *ids, int32_t n) {
  LP_REQUIRE(n >= 1 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  LP_REQUIRE(ids, "block ids are NULL");
  return cpu_kv_check_ids(kv, ids, n, "");
}

/* Writes the validation pattern into every chunk of the blocks (check 0), or counts the words
 * that differ from it (check 1). */
static int64_t walk_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed, int check) {
  int64_t bad = 0;
  for (int32_t i = 0; i < n; i++)
    for (int64_t ls = 0; ls < 2 * (int64_t)kv->num_layers; ls++) {
      uint32_t *w = (uint32_t *)cpu_kv_chunk(kv, ls, block_ids[i]); /* the floats as raw words */
      const uint64_t key = lp_kv_pattern_chunk_key(seed, i, ls);
      for (int64_t j = 0; j < kv->block_floats; j++) {
        const uint32_t want = lp_kv_pattern_word(key, (uint64_t)j);
        if (check) bad += w[j] != want;
        else w[j] = want;
      }
    }
  return bad;
}

lp_status lp_kv_fill_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed) {
  LP_TRY(cpu_kv_check(kv));
  LP_TRY(check_ids(kv, block_ids, n));
  walk_pattern(kv, block_ids, n, seed, 0);
  return LP_OK;
}

lp_status lp_kv_check_pattern(lp_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed,
                              int64_t *out_mismatched_words) {
  LP_TRY(cpu_kv_check(kv));
  LP_TRY(check_ids(kv, block_ids, n));
  LP_REQUIRE(out_mismatched_words, "out_mismatched_words is NULL");
  *out_mismatched_words = walk_pattern(kv, block_ids, n, seed, 1);
  return LP_OK;
}
