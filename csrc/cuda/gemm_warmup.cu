// Runs every GEMM shape a step can use once, at finalize: the layer GEMMs at each row bucket of the
// token workspaces and the LM head at each bucket of the sample rows (gemm_rows in gemm.cu), with
// the steps' own operands and betas. cuBLAS has then chosen and loaded its kernels before the
// first step, so no step launch waits for a kernel to load behind the device's running work.
// Outputs land in scratch workspaces that every step overwrites.
#include "forward.cuh"
#include "ops.cuh"

lp_status gemm_warmup(lp_model *m) {
  const lp_model_config &cfg = m->cfg;
  const LayerWeights &w = m->layers[0];
  StepBuffers &b = m->buf;
  const int h = cfg.hidden_size, inter = cfg.intermediate_size;
  LP_TRY(gemm_row_buckets(m->max_tokens, [&](int t) -> lp_status {
    LP_TRY(gemm_bf16(m->cublas, m->qkv_dim, t, h, w.qkv, b.xnorm, b.qkv, false, 0.f));
    LP_TRY(gemm_bf16(m->cublas, h, t, m->q_dim, w.o, b.attn, b.residual, true, 1.f));
    LP_TRY(gemm_bf16(m->cublas, 2 * inter, t, h, w.gate_up, b.xnorm, b.gate_up, false, 0.f));
    return gemm_bf16(m->cublas, h, t, inter, w.down, b.act, b.residual, true, 1.f);
  }));
  LP_TRY(gemm_row_buckets(m->max_seqs, [&](int r) {
    return gemm_bf16(m->cublas, cfg.vocab_size, r, h, m->lm_head, b.rows_norm, b.logits, true, 0.f);
  }));
  CUDA_CHECK(cudaStreamSynchronize(m->stream));
  return LP_OK;
}
