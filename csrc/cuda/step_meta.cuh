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

// Header words (int32) at the start of the buffer: the block-table stride, the stride of the top
// logprob outputs, and where each control list starts in the step's list buffer (int32 elements;
// see step_controls.cu).
enum {
  META_BT_STRIDE = 0,
  META_TOP_STRIDE = 1,
  META_PENALTY_IDS = 2,
  META_PENALTY_COUNTS = 3,
  META_BIAS_IDS = 4,
  META_BIAS_VALUES = 5,
  META_ALLOWED_IDS = 6,
  META_BANNED_IDS = 7,
  META_HEADER_INTS = 16
};

// Bits of a row's control flags.
enum { ROW_PROCESS = 1 };

// Device (or host) views into the packed buffer.
struct StepMeta {
  const int32_t *header;
  const unsigned long long *seed;  // [R]
  const int32_t *tokens, *positions, *slots;  // [T]
  const int32_t *query_start;      // [S + 1]
  const int32_t *context_lens;     // [S]
  const int32_t *sample_index, *top_k;  // [R]
  const float *temperature, *top_p;     // [R]
  // Sampling controls (lmpool.h), per row: flags (ROW_*), scalars, and [R + 1] list starts.
  const int32_t *row_flags, *top_logprobs, *score_token;  // [R]
  const float *min_p, *presence, *frequency, *repetition;  // [R]
  const int32_t *penalty_start, *bias_start, *allowed_start, *banned_start;  // [R + 1]
  const int32_t *decode_seqs;      // [decode_seqs]
  const int32_t *prefill_tiles;    // [2 * prefill_tiles]: (seq, first query row)
  const int32_t *block_tables;     // [S, bt_stride]
};

// Byte offsets of each array for the given counts; returns the total size.
struct StepLayout {
  size_t header, seed, tokens, positions, slots, query_start, context_lens, sample_index, top_k,
      temperature, top_p, row_flags, top_logprobs, score_token, min_p, presence, frequency, repetition,
      penalty_start, bias_start, allowed_start, banned_start, decode_seqs, prefill_tiles, block_tables, total;
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
  l.row_flags = o; o += (size_t)c.rows * 4;
  l.top_logprobs = o; o += (size_t)c.rows * 4;
  l.score_token = o; o += (size_t)c.rows * 4;
  l.min_p = o; o += (size_t)c.rows * 4;
  l.presence = o; o += (size_t)c.rows * 4;
  l.frequency = o; o += (size_t)c.rows * 4;
  l.repetition = o; o += (size_t)c.rows * 4;
  l.penalty_start = o; o += (size_t)(c.rows + 1) * 4;
  l.bias_start = o; o += (size_t)(c.rows + 1) * 4;
  l.allowed_start = o; o += (size_t)(c.rows + 1) * 4;
  l.banned_start = o; o += (size_t)(c.rows + 1) * 4;
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
  m.row_flags = (const int32_t *)(base + l.row_flags);
  m.top_logprobs = (const int32_t *)(base + l.top_logprobs);
  m.score_token = (const int32_t *)(base + l.score_token);
  m.min_p = (const float *)(base + l.min_p);
  m.presence = (const float *)(base + l.presence);
  m.frequency = (const float *)(base + l.frequency);
  m.repetition = (const float *)(base + l.repetition);
  m.penalty_start = (const int32_t *)(base + l.penalty_start);
  m.bias_start = (const int32_t *)(base + l.bias_start);
  m.allowed_start = (const int32_t *)(base + l.allowed_start);
  m.banned_start = (const int32_t *)(base + l.banned_start);
  m.decode_seqs = (const int32_t *)(base + l.decode_seqs);
  m.prefill_tiles = (const int32_t *)(base + l.prefill_tiles);
  m.block_tables = (const int32_t *)(base + l.block_tables);
  return m;
}

#endif
