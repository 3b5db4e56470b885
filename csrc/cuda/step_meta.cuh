// Per-step metadata: packed on the host into one pinned buffer and copied to the device in one
// cudaMemcpyAsync. The layout depends only on the counts below, so a decode graph captured for a
// padded batch size reads the same offsets every replay; the one value that varies between
// replays (the block-table row stride) lives in the header on the device.
#ifndef LP_CUDA_STEP_META_CUH
#define LP_CUDA_STEP_META_CUH
#include <stddef.h>
#include <stdint.h>

// Prefill attention query tile (rows of one sequence handled by one CTA).
#define LP_PREFILL_TILE 64

// Counts that fix the layout.
struct StepCounts {
  int tokens, seqs, rows;  // T, S, R
  int decode_seqs;         // sequences with one query token, run by the decode kernel
  int prefill_tiles;       // query tiles of the other sequences
  int bt_stride;           // compacted block-table row stride (blocks of the longest context)
};

// Header words (int32) at the start of the buffer.
enum { META_BT_STRIDE = 0, META_HEADER_INTS = 16 };

// Device (or host) views into the packed buffer.
struct StepMeta {
  const int32_t *header;
  const unsigned long long *seed;  // [R]
  const int32_t *tokens, *positions, *slots;  // [T]
  const int32_t *query_start;      // [S + 1]
  const int32_t *context_lens;     // [S]
  const int32_t *sample_index, *top_k;  // [R]
  const float *temperature, *top_p;     // [R]
  const int32_t *decode_seqs;      // [decode_seqs]
  const int32_t *prefill_tiles;    // [2 * prefill_tiles]: (seq, first query row)
  const int32_t *block_tables;     // [S, bt_stride]
};

// Byte offsets of each array for the given counts; returns the total size.
struct StepLayout {
  size_t header, seed, tokens, positions, slots, query_start, context_lens, sample_index, top_k,
      temperature, top_p, decode_seqs, prefill_tiles, block_tables, total;
};

static inline StepLayout step_layout(const StepCounts &c) {
  StepLayout l;
  size_t o = 0;
  l.header = o; o += META_HEADER_INTS * 4;
  l.seed = o; o += (size_t)c.rows * 8;
  l.tokens = o; o += (size_t)c.tokens * 4;
  l.positions = o; o += (size_t)c.tokens * 4;
  l.slots = o; o += (size_t)c.tokens * 4;
  l.query_start = o; o += (size_t)(c.seqs + 1) * 4;
  l.context_lens = o; o += (size_t)c.seqs * 4;
  l.sample_index = o; o += (size_t)c.rows * 4;
  l.top_k = o; o += (size_t)c.rows * 4;
  l.temperature = o; o += (size_t)c.rows * 4;
  l.top_p = o; o += (size_t)c.rows * 4;
  l.decode_seqs = o; o += (size_t)c.decode_seqs * 4;
  l.prefill_tiles = o; o += (size_t)c.prefill_tiles * 8;
  l.block_tables = o; o += (size_t)c.seqs * c.bt_stride * 4;
  l.total = o;
  return l;
}

static inline StepMeta step_meta_view(const uint8_t *base, const StepLayout &l) {
  StepMeta m;
  m.header = (const int32_t *)(base + l.header);
  m.seed = (const unsigned long long *)(base + l.seed);
  m.tokens = (const int32_t *)(base + l.tokens);
  m.positions = (const int32_t *)(base + l.positions);
  m.slots = (const int32_t *)(base + l.slots);
  m.query_start = (const int32_t *)(base + l.query_start);
  m.context_lens = (const int32_t *)(base + l.context_lens);
  m.sample_index = (const int32_t *)(base + l.sample_index);
  m.top_k = (const int32_t *)(base + l.top_k);
  m.temperature = (const float *)(base + l.temperature);
  m.top_p = (const float *)(base + l.top_p);
  m.decode_seqs = (const int32_t *)(base + l.decode_seqs);
  m.prefill_tiles = (const int32_t *)(base + l.prefill_tiles);
  m.block_tables = (const int32_t *)(base + l.block_tables);
  return m;
}

#endif
