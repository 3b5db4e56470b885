/* Rules both builds (and both ends of a transfer) must compute identically: how a packed transfer
 * is cut into segments, and the validation pattern of a transferred block. */
#ifndef LP_KV_TRANSFER_RULES_H
#define LP_KV_TRANSFER_RULES_H
#include <stdint.h>

#include "mix64.h"

/* Default segments: about a quarter of the payload, so pack, link and unpack overlap even for
 * one block, but at least 8 MiB (each link operation has a fixed cost) and at most 32 MiB (the
 * staging ring stays small). Always whole chunks (one layer's K or V of one block). */
#define LP_KV_SEGMENT_MIN_BYTES ((int64_t)8 << 20)
#define LP_KV_SEGMENT_MAX_BYTES ((int64_t)32 << 20)
/* Staging slots per ring: one being packed, one on the link, one being unpacked, one spare. */
#define LP_KV_RING_SLOTS 4

/* Chunks per segment for a transfer of total_chunks chunks of chunk_bytes; requested_bytes > 0
 * overrides the default rule (rounded down to whole chunks, at least one). */
static inline int64_t lp_kv_segment_chunks(int64_t total_chunks, int64_t chunk_bytes, int64_t requested_bytes) {
  int64_t bytes = requested_bytes;
  if (bytes <= 0) {
    const int64_t quarter = (total_chunks * chunk_bytes + 3) / 4;
    bytes = quarter < LP_KV_SEGMENT_MIN_BYTES ? LP_KV_SEGMENT_MIN_BYTES : quarter;
    if (bytes > LP_KV_SEGMENT_MAX_BYTES) bytes = LP_KV_SEGMENT_MAX_BYTES;
  }
  int64_t chunks = bytes / chunk_bytes;
  if (chunks < 1) chunks = 1;
  return chunks < total_chunks ? chunks : total_chunks;
}

/* Key of chunk (layer_side = layer * 2 + K/V) of the i-th block of a transfer. */
static inline LP_HOST_DEVICE uint64_t lp_kv_pattern_chunk_key(uint64_t seed, int64_t i, int64_t layer_side) {
  return lp_mix64(seed ^ lp_mix64(((uint64_t)i << 20) + (uint64_t)layer_side + 1));
}

/* Word `word` (4 bytes) of a chunk with that key. */
static inline LP_HOST_DEVICE uint32_t lp_kv_pattern_word(uint64_t chunk_key, uint64_t word) {
  return (uint32_t)lp_mix64(chunk_key + 0x9E3779B97F4A7C15ULL * (word + 1));
}

#endif
