// lp_step_launch_sampling on CUDA: the second half of a step launched with defer_sampling. The
// forward pass is already on the stream; the host packs the rows' sampling values and controls
// (which the caller computed meanwhile, e.g. structured-output masks), uploads them behind the
// forward pass and enqueues the sampling and the output copies. An event recorded here, before the
// upload, against one after the forward's last kernel, tells how long the device waited for the
// host (lp_model_last_sampling_wait_ms).
#include "forward.cuh"
#include "step_controls.cuh"
#include "step_pack.cuh"

extern "C" lp_status lp_step_launch_sampling(lp_model *m, const lp_step_batch *batch) {
  LP_REQUIRE(m && batch, "null model or batch");
  if (!m->step_pending || !m->sampling_awaited)
    return LP_FAIL(LP_ERR_STATE, "lp_step_launch_sampling without a step launched with defer_sampling");
  const lp_step_batch &in = *batch;
  LP_REQUIRE(in.num_seqs == m->pending_seqs && in.num_tokens == m->pending_tokens_n &&
                 in.num_rows == m->pending_rows_n,
             "lp_step_launch_sampling: counts (num_seqs %d, num_tokens %d, num_rows %d) differ from the launch's "
             "(%d, %d, %d)",
             in.num_seqs, in.num_tokens, in.num_rows, m->pending_seqs, m->pending_tokens_n, m->pending_rows_n);
  LP_TRY(step_validate_sampling(m, in));
  CUDA_CHECK(cudaSetDevice(m->device));
  if (m->pending_ran) {
    const StepCounts &c = m->pending_counts;
    const StepLayout l = step_layout(c);
    // The forward's metadata copy reads the staging buffer this packing rewrites: long done by now
    // (it is the first thing on the stream), so this wait costs nothing in practice.
    CUDA_CHECK(cudaEventSynchronize(m->meta_uploaded));
    step_pack_rows(m, in, c, &m->pending_skipped);
    size_t list_ints = 0;
    // Growing the list buffer frees the old one (cudaFree waits for the device to idle): rare, as
    // its capacity doubles.
    LP_TRY(controls_pack(m, in, c, &list_ints));
    CUDA_CHECK(cudaEventRecord(m->sampling_begin, m->stream));
    uint8_t *dev = m->buf.meta, *host = m->buf.meta_host;
    // Everything the sampling reads and the forward did not: the header's list offsets and the
    // rows' values (seed; top_k through the list starts), contiguous in the layout.
    CUDA_CHECK(cudaMemcpyAsync(dev, host, l.tokens, cudaMemcpyHostToDevice, m->stream));
    CUDA_CHECK(cudaMemcpyAsync(dev + l.top_k, host + l.top_k, l.decode_seqs - l.top_k, cudaMemcpyHostToDevice,
                               m->stream));
    if (list_ints > 0)
      CUDA_CHECK(cudaMemcpyAsync(m->buf.lists, m->buf.lists_host, list_ints * 4, cudaMemcpyHostToDevice, m->stream));
    LP_TRY(sampling_enqueue(m, c, step_meta_view(m->buf.meta, l)));
    CUDA_CHECK(cudaEventRecord(m->step_end, m->stream));
    LP_TRY(step_outputs_enqueue(m, in, c));
  }
  CUDA_CHECK(cudaEventRecord(m->step_done, m->stream));
  m->sampling_awaited = false;
  return LP_OK;
}

extern "C" lp_status lp_model_last_sampling_wait_ms(lp_model *m, double *out_ms) {
  LP_REQUIRE(m, "model handle is NULL");
  LP_REQUIRE(out_ms, "out_ms is NULL");
  *out_ms = m->last_sampling_wait_ms;
  return LP_OK;
}
