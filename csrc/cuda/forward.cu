// lp_step on CUDA: check and pack the metadata on the host, one copy in, the layers on one
// stream (through a decode graph when the batch is a pure decode), one copy of the sampled
// tokens and logprobs out.
#include <math.h>
#include <string.h>

#include "forward.cuh"
#include "graphs.cuh"
#include "ops.cuh"
#include "step_controls.cuh"
#include "step_pack.cuh"

namespace {

// Whether the decode and prefill kernels cover the shape (else the simple kernel runs every token).
bool fast_attention(const lp_model_config &cfg) {
  return attention_decode_supported(cfg.head_dim, cfg.num_heads / cfg.num_kv_heads) &&
         attention_prefill_supported(cfg.head_dim);
}

// Whether the decode kernel does the per-token prologue itself: every token of the step is a
// decode token and the decode kernel runs.
bool prologue_fused(const lp_model *m, const StepCounts &c) {
  return c.prefill_tiles == 0 && c.decode_seqs == c.tokens && fast_attention(m->cfg);
}

// `fused`: the prologue the decode kernel takes over (NULL: rope.cu ran it).
lp_status attention(lp_model *m, lp_kv *kv, int layer, const StepCounts &c, const StepMeta &dm,
                    const RopeArgs *fused) {
  const lp_model_config &cfg = m->cfg;
  AttnArgs a = {};
  a.qkv = m->buf.qkv;
  a.qkv_stride = m->qkv_dim;
  a.k_cache = kv_layer_base(kv, layer, 0);
  a.v_cache = kv_layer_base(kv, layer, 1);
  a.block_size_log2 = kv->block_size_log2;
  a.num_heads = cfg.num_heads;
  a.num_kv_heads = cfg.num_kv_heads;
  a.head_dim = cfg.head_dim;
  a.scale = 1.f / sqrtf((float)cfg.head_dim);
  a.out = m->buf.attn;
  a.fused_prologue = fused != nullptr;
  if (fused) {
    a.cos_sin = fused->cos_sin, a.q_norm = fused->q_norm, a.k_norm = fused->k_norm, a.eps = fused->eps;
    a.k_cache_w = fused->k_cache, a.v_cache_w = fused->v_cache;
  }
  if (!fast_attention(cfg)) return launch_attention_simple(a, dm, c.tokens, c.seqs, m->stream);
  if (c.decode_seqs > 0) {
    LP_TRY(launch_attention_decode(a, dm, c.decode_seqs, m->num_sms, m->stream));
  }
  if (c.prefill_tiles > 0) LP_TRY(launch_attention_prefill(a, dm, c.prefill_tiles, m->stream));
  return LP_OK;
}

GemvArgs gemv_args(const bf16 *w, int n_out, int k, int tokens, const void *x, const bf16 *norm_w, float eps,
                   void *y, int ldy) {
  GemvArgs g = {};
  g.w = w, g.n_out = n_out, g.k = k, g.tokens = tokens, g.x = x, g.row_map = nullptr;
  g.norm_w = norm_w, g.eps = eps, g.y = y, g.ldy = ldy;
  return g;
}

}  // namespace

lp_status forward_logits_enqueue(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm) {
  const lp_model_config &cfg = m->cfg;
  StepBuffers &b = m->buf;
  const int T = c.tokens, h = cfg.hidden_size, inter = cfg.intermediate_size, L = cfg.num_layers;
  const int Tg = gemm_rows(T, m->max_tokens);  // the GEMMs' rows (padding rows are scratch)
  const float eps = cfg.rms_norm_eps;
  cudaStream_t st = m->stream;
  // How the layers' products run: GEMVs that also normalize their inputs (a token or two, see
  // LP_GEMV_MAX_TOKENS), GEMVs on inputs rmsnorm_rows normalized (up to LP_GEMV_MAX_BATCH
  // tokens), or cuBLAS GEMMs. The GEMVs add the residual and apply SiLU*mul in their epilogues.
  enum class Linear { kFusedGemv, kGemv, kGemm };
  auto gemvs_fit = [&](GemvInput in) {
    return gemv_fits(T, h, in) && gemv_fits(T, m->q_dim, GEMV_IN_BF16) && gemv_fits(T, inter, GEMV_IN_BF16);
  };
  const Linear lin = gemvs_fit(GEMV_IN_NORM) ? Linear::kFusedGemv
                     : gemvs_fit(GEMV_IN_BF16) ? Linear::kGemv
                                               : Linear::kGemm;
  const bool fused = lin == Linear::kFusedGemv, gemm = lin == Linear::kGemm;
  const bool fuse_prologue = prologue_fused(m, c);
  // Fused GEMVs: the first layer's QKV GEMV embeds the tokens and computes the rope table itself
  // (two launches fewer: 1 x H200, batch 1, about 3 us a step).
  if (!fused) {
    LP_TRY(launch_embed(m->embed, dm.tokens, T, h, b.residual, m->layers[0].input_norm, eps, b.xnorm, st));
    LP_TRY(launch_rope_table(dm.positions, b.rope_inv_freq, T, cfg.head_dim / 2, b.rope_cos_sin, st));
  }
  for (int l = 0; l < L; l++) {
    const LayerWeights &w = m->layers[l];
    if (fused) {
      GemvArgs g = gemv_args(w.qkv, m->qkv_dim, h, T, b.residual, w.input_norm, eps, b.qkv, m->qkv_dim);
      if (l == 0) {
        g.x = m->embed, g.row_map = dm.tokens;
        g.first = {b.residual, dm.positions, b.rope_inv_freq, b.rope_cos_sin, cfg.head_dim / 2};
      }
      LP_TRY(launch_gemv(l == 0 ? GEMV_IN_EMBED : GEMV_IN_NORM, GEMV_OUT_BF16, g, m->num_sms, st));
    } else if (!gemm) {
      LP_TRY(launch_gemv(GEMV_IN_BF16, GEMV_OUT_BF16,
                         gemv_args(w.qkv, m->qkv_dim, h, T, b.xnorm, nullptr, eps, b.qkv, m->qkv_dim), m->num_sms,
                         st));
    } else {
      LP_TRY(gemm_bf16(m->cublas, m->qkv_dim, Tg, h, w.qkv, b.xnorm, b.qkv, false, 0.f));
    }
    RopeArgs r;
    r.qkv = b.qkv, r.tokens = T, r.slots = dm.slots, r.cos_sin = b.rope_cos_sin;
    r.q_norm = w.q_norm, r.k_norm = w.k_norm, r.eps = eps;
    r.num_heads = cfg.num_heads, r.num_kv_heads = cfg.num_kv_heads, r.head_dim = cfg.head_dim;
    r.k_cache = kv_layer_base(kv, l, 0), r.v_cache = kv_layer_base(kv, l, 1);
    if (!fuse_prologue) LP_TRY(launch_qk_norm_rope_kv(r, st));
    LP_TRY(attention(m, kv, l, c, dm, fuse_prologue ? &r : nullptr));
    if (gemm) {
      LP_TRY(gemm_bf16(m->cublas, h, Tg, m->q_dim, w.o, b.attn, b.residual, true, 1.f));
    } else {
      LP_TRY(launch_gemv(GEMV_IN_BF16, GEMV_OUT_ADD_F32,
                         gemv_args(w.o, h, m->q_dim, T, b.attn, nullptr, eps, b.residual, h), m->num_sms, st));
    }
    if (fused) {
      LP_TRY(launch_gemv(GEMV_IN_NORM, GEMV_OUT_SILU_MUL,
                         gemv_args(w.gate_up, inter, h, T, b.residual, w.post_norm, eps, b.act, inter), m->num_sms,
                         st));
    } else {
      LP_TRY(launch_rmsnorm_rows(b.residual, nullptr, T, h, w.post_norm, eps, b.xnorm, st));
      if (gemm) {
        LP_TRY(gemm_bf16(m->cublas, 2 * inter, Tg, h, w.gate_up, b.xnorm, b.gate_up, false, 0.f));
        LP_TRY(launch_silu_mul(b.gate_up, T, inter, b.act, st));
      } else {
        LP_TRY(launch_gemv(GEMV_IN_BF16, GEMV_OUT_SILU_MUL,
                           gemv_args(w.gate_up, inter, h, T, b.xnorm, nullptr, eps, b.act, inter), m->num_sms, st));
      }
    }
    if (gemm) {
      LP_TRY(gemm_bf16(m->cublas, h, Tg, inter, w.down, b.act, b.residual, true, 1.f));
    } else {
      LP_TRY(launch_gemv(GEMV_IN_BF16, GEMV_OUT_ADD_F32,
                         gemv_args(w.down, h, inter, T, b.act, nullptr, eps, b.residual, h), m->num_sms, st));
    }
    if (!fused && l + 1 < L)
      LP_TRY(launch_rmsnorm_rows(b.residual, nullptr, T, h, m->layers[l + 1].input_norm, eps, b.xnorm, st));
  }
  if (c.rows == 0) return LP_OK;
  const int V = cfg.vocab_size, R = c.rows;
  // The GEMV also leaves each row's max, argmax and sum of exp per CTA, which the sampler merges
  // instead of reading the logits again.
  const bool head_gemv = gemv_head_fits(R, h);
  if (head_gemv) {
    GemvArgs g = gemv_args(m->lm_head, V, h, R, b.residual, m->final_norm, eps, b.logits, V);
    g.row_map = dm.sample_index;
    g.row_stats = b.head_stats;
    LP_TRY(launch_gemv(GEMV_IN_NORM, GEMV_OUT_F32, g, m->num_sms, st));
  } else {
    LP_TRY(launch_rmsnorm_rows(b.residual, dm.sample_index, R, h, m->final_norm, eps, b.rows_norm, st));
    LP_TRY(gemm_bf16(m->cublas, V, gemm_rows(R, m->max_seqs), h, m->lm_head, b.rows_norm, b.logits, true, 0.f));
  }
  return LP_OK;
}

lp_status sampling_enqueue(lp_model *m, const StepCounts &c, const StepMeta &dm) {
  if (c.rows == 0) return LP_OK;
  StepBuffers &b = m->buf;
  const int V = m->cfg.vocab_size, R = c.rows;
  const bool head_gemv = gemv_head_fits(R, m->cfg.hidden_size);  // as forward_logits_enqueue chose
  cudaStream_t st = m->stream;
  SamplingBuffers out;
  out.out_tokens = b.sample_out;
  out.out_logprobs = reinterpret_cast<float *>(b.sample_out + R);
  out.ranks = b.sample_out + 2 * R;
  out.top_ids = b.top_out;
  out.top_logprobs = reinterpret_cast<float *>(b.top_out + (size_t)m->max_seqs * LP_MAX_TOP_LOGPROBS);
  out.processed = b.processed;
  out.lists = b.lists;
  return launch_sampling(b.logits, R, V, dm, out, head_gemv ? 1 : sampling_parts(R, m->num_sms), b.sample_parts,
                         b.sample_counters, head_gemv ? b.head_stats : nullptr, b.head_stats_parts, st);
}

lp_status forward_enqueue(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm) {
  LP_TRY(forward_logits_enqueue(m, kv, c, dm));
  return sampling_enqueue(m, c, dm);
}

lp_status step_outputs_enqueue(lp_model *m, const lp_step_batch &in, const StepCounts &c) {
  const int num_rows = in.num_rows;
  m->pending_top_stride = 0;
  if (num_rows > 0) {
    CUDA_CHECK(cudaMemcpyAsync(m->buf.out_host, m->buf.sample_out, (size_t)3 * c.rows * 4, cudaMemcpyDeviceToHost,
                               m->stream));
    if (in.out_logits)
      CUDA_CHECK(cudaMemcpyAsync(in.out_logits, m->buf.logits, (size_t)num_rows * m->cfg.vocab_size * 4,
                                 cudaMemcpyDeviceToHost, m->stream));
    // Only the k ids and logprobs of each row leave the device, never its logits.
    const size_t top = (size_t)num_rows * in.max_top_logprobs, cap = (size_t)m->max_seqs * LP_MAX_TOP_LOGPROBS;
    if (top > 0) {
      CUDA_CHECK(cudaMemcpyAsync(m->buf.top_host, m->buf.top_out, top * 4, cudaMemcpyDeviceToHost, m->stream));
      CUDA_CHECK(cudaMemcpyAsync(m->buf.top_host + cap, m->buf.top_out + cap, top * 4, cudaMemcpyDeviceToHost,
                                 m->stream));
      m->pending_top_stride = in.max_top_logprobs;
    }
  }
  m->pending_rows = num_rows;
  m->pending_crows = c.rows;
  m->pending_tokens = in.out_tokens;
  m->pending_logprobs = in.out_logprobs;
  m->pending_ranks = in.out_ranks;
  m->pending_top_ids = in.out_top_token_ids;
  m->pending_top_logprobs = in.out_top_logprobs;
  return LP_OK;
}

extern "C" lp_status lp_step_launch(lp_model *m, lp_kv *kv, const lp_step_batch *batch) {
  LP_REQUIRE(m && kv && batch, "null model, kv or batch");
  if (!m->finalized) return LP_FAIL(LP_ERR_STATE, "lp_step before lp_model_finalize");
  if (m->step_pending) return LP_FAIL(LP_ERR_STATE, "lp_step_launch while the last launched step is not collected");
  LP_REQUIRE(kv->num_layers == m->cfg.num_layers && kv->kv_heads == m->cfg.num_kv_heads &&
                 kv->head_dim == m->cfg.head_dim,
             "KV cache shape (layers %d, kv_heads %d, head_dim %d) does not match the model (%d, %d, %d)",
             kv->num_layers, kv->kv_heads, kv->head_dim, m->cfg.num_layers, m->cfg.num_kv_heads, m->cfg.head_dim);
  const lp_step_batch &in = *batch;
  const int num_seqs = in.num_seqs, num_tokens = in.num_tokens;
  // A deferred step's sampling values, controls and outputs come with lp_step_launch_sampling.
  const bool deferred = in.defer_sampling != 0;
  StepCounts c;
  bool pure_decode = false;
  LP_TRY(step_validate(m, kv, in, &c, &pure_decode));
  if (!deferred) LP_TRY(step_validate_sampling(m, in));
  CUDA_CHECK(cudaSetDevice(m->device));
  m->pending_rows = 0;
  m->pending_skipped = 0;
  m->pending_ran = num_tokens > 0;
  m->pending_top_stride = 0;
  if (num_tokens > 0) {  // an empty step has nothing to run (no rows can sample from it)
    // A graph reads its list buffer through the pointer it was captured with, and that buffer
    // moves when it grows: steps with control lists run eagerly. A deferred step's graph ends at
    // the logits, so its lists (uploaded with the sampling) never stop it.
    const bool graphable = pure_decode && (deferred || controls_list_ints(in) == 0);
    const int graph_batch = graphable ? decode_graph_batch(m->graphs, num_seqs) : 0;
    if (graph_batch > 0) c = StepCounts{graph_batch, graph_batch, graph_batch, graph_batch, 0, c.bt_stride};
    const size_t bytes = step_pack(m, kv, in, c);
    size_t list_ints = 0;
    if (!deferred) {
      step_pack_rows(m, in, c, &m->pending_skipped);
      LP_TRY(controls_pack(m, in, c, &list_ints));
    }
    CUDA_CHECK(cudaMemcpyAsync(m->buf.meta, m->buf.meta_host, bytes, cudaMemcpyHostToDevice, m->stream));
    if (list_ints > 0)
      CUDA_CHECK(cudaMemcpyAsync(m->buf.lists, m->buf.lists_host, list_ints * 4, cudaMemcpyHostToDevice, m->stream));
    // lp_step_launch_sampling rewrites the staging buffer once this copy has read it.
    if (deferred) CUDA_CHECK(cudaEventRecord(m->meta_uploaded, m->stream));
    const StepMeta dm = step_meta_view(m->buf.meta, step_layout(c));
    CUDA_CHECK(cudaEventRecord(m->step_begin, m->stream));
    if (graph_batch > 0) {
      LP_TRY(decode_graph_run(m, kv, c, dm, deferred));
    } else if (deferred) {
      LP_TRY(forward_logits_enqueue(m, kv, c, dm));
    } else {
      LP_TRY(forward_enqueue(m, kv, c, dm));
    }
    if (!deferred) {
      CUDA_CHECK(cudaEventRecord(m->step_end, m->stream));
      LP_TRY(step_outputs_enqueue(m, in, c));
    } else {
      CUDA_CHECK(cudaEventRecord(m->forward_end, m->stream));
    }
  }
  m->pending_counts = c;
  m->pending_seqs = num_seqs;
  m->pending_tokens_n = num_tokens;
  m->pending_rows_n = in.num_rows;
  m->pending_deferred = deferred;
  m->sampling_awaited = deferred;
  if (!deferred) CUDA_CHECK(cudaEventRecord(m->step_done, m->stream));
  m->step_pending = true;
  return LP_OK;
}

extern "C" lp_status lp_step_collect(lp_model *m, int32_t wait, int32_t *out_done) {
  LP_REQUIRE(m && out_done, "null model or out_done");
  if (!m->step_pending) return LP_FAIL(LP_ERR_STATE, "lp_step_collect without a launched step");
  if (m->sampling_awaited)
    return LP_FAIL(LP_ERR_STATE, "lp_step_collect before lp_step_launch_sampling of a step launched with defer_sampling");
  CUDA_CHECK(cudaSetDevice(m->device));
  if (wait) {
    // A failed step stays pending: its error is reported, and the model is not used again.
    CUDA_CHECK(cudaEventSynchronize(m->step_done));
  } else {
    const cudaError_t e = cudaEventQuery(m->step_done);
    if (e == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: leave no trace of it
      *out_done = 0;
      return LP_OK;
    }
    CUDA_CHECK(e);
  }
  m->step_pending = false;
  *out_done = 1;
  if (!m->pending_ran) return LP_OK;  // an empty step
  float device_ms = 0.f;
  if (m->pending_deferred) {
    // Device time is the forward pass and the sampling; the wait between them is reported apart.
    float forward_ms = 0.f, wait_ms = 0.f, sampling_ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&forward_ms, m->step_begin, m->forward_end));
    CUDA_CHECK(cudaEventElapsedTime(&wait_ms, m->forward_end, m->sampling_begin));
    CUDA_CHECK(cudaEventElapsedTime(&sampling_ms, m->sampling_begin, m->step_end));
    device_ms = forward_ms + sampling_ms;
    m->last_sampling_wait_ms = wait_ms;
  } else {
    CUDA_CHECK(cudaEventElapsedTime(&device_ms, m->step_begin, m->step_end));
  }
  m->last_step_ms = device_ms;
  const int rows = m->pending_rows;
  if (rows == 0) return LP_OK;
  memcpy(m->pending_tokens, m->buf.out_host, (size_t)rows * 4);
  memcpy(m->pending_logprobs, m->buf.out_host + m->pending_crows, (size_t)rows * 4);
  if (m->pending_ranks) memcpy(m->pending_ranks, m->buf.out_host + 2 * m->pending_crows, (size_t)rows * 4);
  const int stride = m->pending_top_stride;
  if (stride > 0) {
    const size_t top = (size_t)rows * stride, cap = (size_t)m->max_seqs * LP_MAX_TOP_LOGPROBS;
    memcpy(m->pending_top_ids, m->buf.top_host, top * 4);
    memcpy(m->pending_top_logprobs, m->buf.top_host + cap, top * 4);
  }
  for (int r = 0; m->pending_skipped > 0 && r < rows; r++) {
    if (!m->buf.row_skipped[r]) continue;
    m->pending_tokens[r] = -1;
    m->pending_logprobs[r] = NAN;
  }
  return LP_OK;
}
