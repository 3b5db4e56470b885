/* Paged KV cache of the CPU backend: one fp32 tensor [L, 2, num_blocks, block_size, kv_heads,
 * head_dim], the step's K/V writes through slot_mapping, and block gather/scatter for transfers. */
#include <stdlib.h>
#include <string.h>

#include "cpu_model.h"

lp_status cpu_kv_check(const lp_kv *kv) {
  LP_REQUIRE(kv, "kv cache handle is NULL");
  LP_REQUIRE(kv->magic == LP_CPU_KV_MAGIC, "handle %p is not a live CPU KV cache", (const void *)kv);
  return LP_OK;
}

lp_status lp_kv_create(lp_model *m, int32_t num_blocks, int32_t block_size, lp_kv **out_kv) {
  LP_TRY(cpu_model_check(m));
  LP_REQUIRE(out_kv, "out_kv is NULL");
  LP_REQUIRE(num_blocks > 0 && block_size > 0, "num_blocks=%d and block_size=%d must be positive",
             num_blocks, block_size);
  lp_kv *kv = calloc(1, sizeof *kv);
  if (!kv) return LP_FAIL(LP_ERR_OOM, "out of memory allocating the KV cache handle");
  kv->num_layers = m->cfg.num_layers;
  kv->num_blocks = num_blocks;
  kv->block_size = block_size;
  kv->kv_heads = m->cfg.num_kv_heads;
  kv->head_dim = m->cfg.head_dim;
  kv->block_floats = (int64_t)block_size * kv->kv_heads * kv->head_dim;
  const size_t total = (size_t)kv->num_layers * 2 * (size_t)num_blocks * (size_t)kv->block_floats;
  kv->data = calloc(total, sizeof(float));
  if (!kv->data) {
    free(kv);
    return LP_FAIL(LP_ERR_OOM, "out of memory allocating a KV cache of %d blocks x %d tokens (%zu bytes)",
                   num_blocks, block_size, total * sizeof(float));
  }
  kv->magic = LP_CPU_KV_MAGIC;
  *out_kv = kv;
  return LP_OK;
}

lp_status lp_kv_block_bytes(lp_kv *kv, int64_t *out_bytes) {
  LP_TRY(cpu_kv_check(kv));
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = (int64_t)kv->num_layers * 2 * kv->block_floats * (int64_t)sizeof(float);
  return LP_OK;
}

lp_status lp_kv_destroy(lp_kv *kv) {
  if (!kv) return LP_OK;
  LP_TRY(cpu_kv_check(kv));
  kv->magic = 0;
  free(kv->data);
  free(kv);
  return LP_OK;
}

lp_status cpu_kv_check_ids(const lp_kv *kv, const int32_t *ids, int32_t n, const char *which) {
  for (int32_t i = 0; i < n; i++)
    LP_REQUIRE(ids[i] >= 0 && ids[i] < kv->num_blocks, "%sblock id %d (index %d) out of range [0, %d)",
               which, ids[i], i, kv->num_blocks);
  return LP_OK;
}

/* Packed layout [L, 2, n, block_size, kv_heads, head_dim]: block i of (layer, K/V) is chunk
 * (l * 2 + which) * n + i. Copies cache -> host when to_host, else host -> cache (host is then
 * only read). */
static lp_status copy_packed(lp_kv *kv, const int32_t *block_ids, int32_t n, const void *host, int to_host) {
  LP_TRY(cpu_kv_check(kv));
  LP_REQUIRE(n >= 0, "n=%d must be >= 0", n);
  LP_REQUIRE(n == 0 || (block_ids && host), "null pointer (block_ids=%p buffer=%p)",
             (const void *)block_ids, host);
  LP_TRY(cpu_kv_check_ids(kv, block_ids, n, ""));
  const size_t bytes = (size_t)kv->block_floats * sizeof(float);
  for (int64_t lw = 0; lw < (int64_t)kv->num_layers * 2; lw++)
    for (int32_t i = 0; i < n; i++) {
      float *block = cpu_kv_chunk(kv, lw, block_ids[i]);
      char *packed = (char *)host + (size_t)(lw * n + i) * bytes;
      if (to_host) memcpy(packed, block, bytes);
      else memcpy(block, packed, bytes);
    }
  return LP_OK;
}

lp_status lp_kv_gather_host(lp_kv *kv, const int32_t *block_ids, int32_t n, void *dst) {
  return copy_packed(kv, block_ids, n, dst, 1);
}

lp_status lp_kv_scatter_host(lp_kv *kv, const int32_t *block_ids, int32_t n, const void *src) {
  return copy_packed(kv, block_ids, n, src, 0);
}

/* Stores each token's K and V (columns k_offset and v_offset of its qkv row) at its slot. Slots
 * were range-checked by cpu_step_validate. */
void cpu_kv_write(const lp_kv *kv, int32_t layer, const float *qkv, int64_t ld_qkv,
                  int64_t k_offset, int64_t v_offset, const int32_t *slot_mapping, int64_t tokens) {
  const int64_t row = (int64_t)kv->kv_heads * kv->head_dim;
  float *k_cache = cpu_kv_chunk(kv, 2 * layer, 0), *v_cache = cpu_kv_chunk(kv, 2 * layer + 1, 0);
  for (int64_t t = 0; t < tokens; t++) {
    const int64_t slot = slot_mapping[t];
    memcpy(k_cache + slot * row, qkv + t * ld_qkv + k_offset, (size_t)row * sizeof(float));
    memcpy(v_cache + slot * row, qkv + t * ld_qkv + v_offset, (size_t)row * sizeof(float));
  }
}
