/*
 * Private structures and internal entry points of the CPU backend (fp32 storage and arithmetic).
 */
#ifndef LP_CPU_MODEL_H
#define LP_CPU_MODEL_H
#include <stdint.h>

#include "../common/lp_error.h"
#include "../common/sampling_controls.h"

/* A loop runs on several threads only with at least this much work (multiply-adds or the like,
 * about half a millisecond on one core): below that, waking threads costs more than it saves, and
 * far more when several worker processes share the cores. */
#define LP_PARALLEL_MIN_WORK ((int64_t)1 << 21)

/* Keys per attention chunk: fixed, independent of the block size, so results do not depend on
 * how the cache is paged. */
#define LP_ATTN_CHUNK 32

/* Sampling bounds the Gumbel noise per bucket of its top LP_GUMBEL_BITS bits (sampling.c). */
#define LP_GUMBEL_BITS 12
#define LP_GUMBEL_BUCKETS (1 << LP_GUMBEL_BITS)

/* Handle tags: a handle of the wrong kind (or a freed one) is an error, not a crash. */
#define LP_CPU_MODEL_MAGIC 0x4c50434d4f44454cULL /* "LPCMODEL" */
#define LP_CPU_KV_MAGIC 0x4c5043504b564348ULL    /* "LPCPKVCH" */

/* One decoder layer. q/k/v and gate/up are stored fused so one matmul produces them together;
 * lp_model_set_weight writes each part straight into its rows. */
typedef struct cpu_layer {
  float *input_norm; /* [hidden] */
  float *qkv;        /* [q_dim + 2 * kv_dim, hidden]: q rows, k rows, v rows */
  float *o;          /* [hidden, q_dim] */
  float *q_norm;     /* [head_dim] (Qwen3) */
  float *k_norm;     /* [head_dim] (Qwen3) */
  float *post_norm;  /* [hidden] */
  float *gate_up;    /* [2 * intermediate, hidden]: gate rows, then up rows */
  float *down;       /* [hidden, intermediate] */
  uint32_t present;  /* bit (kind - LP_W_INPUT_NORM) for each per-layer weight set */
} cpu_layer;

/* Buffers of one step, sized in finalize() for max_tokens tokens and max_rows sampled rows. */
typedef struct cpu_workspace {
  int32_t max_tokens, max_rows, threads;
  float *h;              /* [max_tokens, hidden] residual stream */
  float *x;              /* [max_tokens, hidden] normed input of a sub-layer */
  float *qkv;            /* [max_tokens, qkv_dim] */
  float *attn;           /* [max_tokens, q_dim] */
  float *gate_up;        /* [max_tokens, 2 * intermediate] */
  float *act;            /* [max_tokens, intermediate] */
  float *rope_cos;       /* [max_tokens, head_dim / 2] */
  float *rope_sin;       /* [max_tokens, head_dim / 2] */
  int32_t *token_seq;    /* [max_tokens] sequence index of each token */
  float *row_x;          /* [max_rows, hidden] final-normed rows that sample */
  float *logits;         /* [max_rows, vocab] */
  float *attn_scratch;   /* [threads, attn_scratch_floats] */
  int64_t attn_scratch_floats;
  float *sample_scratch; /* [threads, 3 * vocab] */
  float *gumbel_bounds;  /* [2 * LP_GUMBEL_BUCKETS] */
} cpu_workspace;

/* The lp_model handle of lmpool.h. */
struct lp_model {
  uint64_t magic;
  lp_model_config cfg;
  int64_t q_dim, kv_dim, qkv_dim;
  float *embed, *final_norm, *lm_head;
  uint32_t global_present; /* bit kind for LP_W_EMBED / FINAL_NORM / LM_HEAD */
  cpu_layer *layers;
  float *inv_freq; /* [head_dim / 2] RoPE inverse frequencies (llama3 scaling applied) */
  int finalized;
  double last_step_ms; /* compute time of the last lp_step that ran tokens */
  int step_pending;    /* a launched step not yet collected (the CPU computes it at launch) */
  /* A step launched with defer_sampling whose lp_step_launch_sampling has not come: its counts,
   * its forward pass's compute time and end (cpu_clock_ms), for the sampling call. */
  int sampling_awaited;
  int32_t deferred_seqs, deferred_tokens, deferred_rows;
  double forward_ms, forward_end_ms;
  double last_sampling_wait_ms; /* lp_model_last_sampling_wait_ms */
  cpu_workspace ws;
};

/* The lp_kv handle of lmpool.h. */
struct lp_kv {
  uint64_t magic;
  int32_t num_layers, num_blocks, block_size, kv_heads, head_dim;
  int64_t block_floats; /* one block of K (or V) of one layer: block_size * kv_heads * head_dim */
  float *data;          /* [L, 2, num_blocks, block_size, kv_heads, head_dim] */
};

/* Handle checks: LP_ERR_INVALID for NULL or a handle of another kind (or a freed one). */
lp_status cpu_model_check(const lp_model *m);
lp_status cpu_kv_check(const lp_kv *kv);

/* First float of block `block`'s chunk layer_side (= layer * 2 + K/V). */
static inline float *cpu_kv_chunk(const lp_kv *kv, int64_t layer_side, int64_t block) {
  return kv->data + (layer_side * kv->num_blocks + block) * kv->block_floats;
}
/* Checks that ids[0, n) are blocks of kv; the error names the id as "<which>block id". */
lp_status cpu_kv_check_ids(const lp_kv *kv, const int32_t *ids, int32_t n, const char *which);

/* Weights (weights.c): allocation of the fused buffers, hand-over of one weight (numel elements
 * of dtype, converted to fp32), the bytes held, and the completeness check. */
lp_status cpu_weights_alloc(lp_model *m);
void cpu_weights_free(lp_model *m);
lp_status cpu_weights_set(lp_model *m, int32_t layer, int32_t kind, int32_t dtype, const void *data, int64_t numel);
int64_t cpu_weights_bytes(const lp_model *m);
lp_status cpu_weights_check_complete(const lp_model *m);

/* Workspaces (workspace.c). */
lp_status cpu_workspace_alloc(lp_model *m, int32_t max_tokens, int32_t max_rows);
void cpu_workspace_free(cpu_workspace *ws);

/* Kernels. The step runs one at a time per model: its workspaces are shared. */
void cpu_rmsnorm_row(const float *x, const float *w, float *out, int64_t dim, float eps);
void cpu_rmsnorm_rows(const float *x, int64_t ldx, const float *w, float *out, int64_t ldo,
                      int64_t rows, int64_t dim, float eps);
void cpu_linear(const float *x, int64_t ldx, int64_t tokens, int64_t in, const float *w,
                int64_t out, float *y, int64_t ldy, int accumulate);
/* The 2 x 4 dot-product block of cpu_math.h on AVX2 (dot_avx2.c), bit-identical to lp_dot_2x4. */
int cpu_has_avx2(void);
void cpu_dot_2x4_avx2(const float *w0, const float *w1, const float *x, int64_t ldx, int64_t n,
                      float out[2][4]);
void cpu_rope_table(const lp_model *m, const int32_t *positions, int64_t tokens);
void cpu_rope_apply(const lp_model *m, float *qkv, int64_t tokens);
void cpu_kv_write(const lp_kv *kv, int32_t layer, const float *qkv, int64_t ld_qkv,
                  int64_t k_offset, int64_t v_offset, const int32_t *slot_mapping, int64_t tokens);
void cpu_attention(const lp_model *m, const lp_kv *kv, int32_t layer, const lp_step_batch *s);
/* Checks a step batch against the model's limits and the cache (step_check.c): the forward
 * pass's part (sample_index included), then the sampling's (its values, controls and outputs). */
lp_status cpu_step_validate(const lp_model *m, const lp_kv *kv, const lp_step_batch *s);
lp_status cpu_step_validate_sampling(const lp_model *m, const lp_step_batch *s);
/* Fills bounds[0, B) with lower and bounds[B, 2B) with upper bounds of g per bucket. */
void cpu_gumbel_bounds(float *bounds);
/* One row's sampling inputs: the step's per-row values and its controls (sampling_controls.h). */
typedef struct cpu_row_sampling {
  float temperature, top_p;
  int32_t top_k, position, max_top;
  uint64_t seed;
  lp_row_controls ctl;
} cpu_row_sampling;
/* Samples one row of raw logits (see lp_step in lmpool.h); scratch holds 3 * vocab floats. A row
 * with invalid sampling parameters gets token -1 and logprob NaN. out_top_* hold max_top entries;
 * out_rank (NULL: not wanted) gets a scored row's rank, else 0. */
void cpu_sample_row(const float *logits, int64_t vocab, const cpu_row_sampling *p, const float *gumbel_bounds,
                    float *scratch, int32_t *out_token, float *out_logprob, int32_t *out_top_ids,
                    float *out_top_lps, int32_t *out_rank);

#endif
