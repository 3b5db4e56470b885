/* Packing of the CPU build: blocks to and from a device buffer (host memory) in the packed
 * [L, 2, n, block_size, kv_heads, head_dim] layout, the segment rule, and the validation
 * pattern. Everything completes on return, so jobs are always 0. */
#include <string.h>

#include "../common/kv_transfer_rules.h"
#include "cpu_transfer.h"

static int64_t chunk_bytes(const cpu_kv *kv) { return kv->block_floats * (int64_t)sizeof(float); }

static lp_status check_pack_args(const cpu_kv *kv, const cpu_buffer *b, int32_t n) {
  LP_REQUIRE(n >= 1 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  const int64_t need = (int64_t)n * 2 * kv->num_layers * chunk_bytes(kv);
  LP_REQUIRE(need <= b->bytes, "%d blocks need %lld bytes; the buffer has %lld", n, (long long)need,
             (long long)b->bytes);
  return LP_OK;
}

/* The host buffer behind buf, once kv_handle, buf and n are checked for a pack or unpack. */
static lp_status open_pack(uint64_t kv_handle, uint64_t buf, int32_t n, uint64_t *out_job, char **data) {
  cpu_kv *kv;
  cpu_buffer *b;
  LP_TRY(cpu_kv_from_handle(kv_handle, &kv));
  LP_TRY(cpu_buffer_from_handle(buf, &b));
  LP_TRY(check_pack_args(kv, b, n));
  if (out_job) *out_job = 0;
  *data = b->data;
  return LP_OK;
}

lp_status lp_kv_pack(uint64_t kv_handle, const int32_t *block_ids, int32_t n, uint64_t buf, uint64_t *out_job) {
  char *data;
  LP_TRY(open_pack(kv_handle, buf, n, out_job, &data));
  return lp_kv_gather_host(kv_handle, block_ids, n, data);
}

lp_status lp_kv_unpack(uint64_t kv_handle, const int32_t *block_ids, int32_t n, uint64_t buf, uint64_t *out_job) {
  char *data;
  LP_TRY(open_pack(kv_handle, buf, n, out_job, &data));
  return lp_kv_scatter_host(kv_handle, block_ids, n, data);
}

lp_status lp_kv_segment_bytes(uint64_t kv_handle, int32_t n, int64_t segment_bytes, int64_t *out_bytes) {
  cpu_kv *kv;
  LP_TRY(cpu_kv_from_handle(kv_handle, &kv));
  LP_REQUIRE(out_bytes && n > 0, "out_bytes is NULL or n=%d is not positive", n);
  const int64_t total = (int64_t)n * 2 * kv->num_layers;
  *out_bytes = lp_kv_segment_chunks(total, chunk_bytes(kv), segment_bytes) * chunk_bytes(kv);
  return LP_OK;
}

static lp_status check_ids(const cpu_kv *kv, const int32_t *ids, int32_t n) {
  LP_REQUIRE(n >= 1 && n <= LP_KV_MAX_TRANSFER_BLOCKS, "n=%d must be in [1, %d]", n, LP_KV_MAX_TRANSFER_BLOCKS);
  LP_REQUIRE(ids, "block ids are NULL");
  return cpu_kv_check_ids(kv, ids, n, "");
}

/* Writes the validation pattern into every chunk of the blocks (check 0), or counts the words
 * that differ from it (check 1). */
static int64_t walk_pattern(cpu_kv *kv, const int32_t *block_ids, int32_t n, uint64_t seed, int check) {
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

lp_status lp_kv_fill_pattern(uint64_t kv_handle, const int32_t *block_ids, int32_t n, uint64_t seed) {
  cpu_kv *kv;
  LP_TRY(cpu_kv_from_handle(kv_handle, &kv));
  LP_TRY(check_ids(kv, block_ids, n));
  walk_pattern(kv, block_ids, n, seed, 0);
  return LP_OK;
}

lp_status lp_kv_check_pattern(uint64_t kv_handle, const int32_t *block_ids, int32_t n, uint64_t seed,
                              int64_t *out_mismatched_words) {
  cpu_kv *kv;
  LP_TRY(cpu_kv_from_handle(kv_handle, &kv));
  LP_TRY(check_ids(kv, block_ids, n));
  LP_REQUIRE(out_mismatched_words, "out_mismatched_words is NULL");
  *out_mismatched_words = walk_pattern(kv, block_ids, n, seed, 1);
  return LP_OK;
}
