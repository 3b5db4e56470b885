// Straightforward paged attention for any head size: one warp per (token, query head), keys
// visited one at a time with an online softmax. Used where the fast kernels do not apply (head
// sizes other than 64/128/256, GQA groups over 8); slow but exact in fp32.
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

const int kWarps = 4;
const int kMaxPerLane = 8;  // head_dim <= 256

__global__ void simple_attention_kernel(AttnArgs a, StepMeta m, int seqs) {
  pdl_trigger();
  pdl_wait();
  const int t = blockIdx.x, head = blockIdx.y * kWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (head >= a.num_heads) return;
  int lo = 0, hi = seqs - 1;  // sequence owning token t: last s with query_start[s] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (m.query_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int seq = lo, qs = m.query_start[seq], ql = m.query_start[seq + 1] - qs;
  const int ctx = m.context_lens[seq] - ql + (t - qs);  // sees keys 0..ctx
  const int D = a.head_dim, kvh = head / (a.num_heads / a.num_kv_heads);
  const int *bt = m.block_tables + (size_t)seq * m.header[META_BT_STRIDE];
  const int bs_mask = (1 << a.block_size_log2) - 1;
  float q[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; i++) {
    const int d = lane + 32 * i;
    q[i] = d < D ? __bfloat162float(a.qkv[(size_t)t * a.qkv_stride + (size_t)head * D + d]) * a.scale : 0.f;
    acc[i] = 0.f;
  }
  float mx = -1e30f, sum = 0.f;
  for (int j = 0; j <= ctx; j++) {
    const size_t slot = ((size_t)bt[j >> a.block_size_log2] << a.block_size_log2) | (size_t)(j & bs_mask);
    const size_t off = slot * a.num_kv_heads * D + (size_t)kvh * D;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; i++) {
      const int d = lane + 32 * i;
      if (d < D) dot += q[i] * __bfloat162float(a.k_cache[off + d]);
    }
    dot = warp_sum(dot);
    const float mnew = fmaxf(mx, dot), alpha = __expf(mx - mnew), p = __expf(dot - mnew);
    mx = mnew;
    sum = sum * alpha + p;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; i++) {
      const int d = lane + 32 * i;
      if (d < D) acc[i] = acc[i] * alpha + p * __bfloat162float(a.v_cache[off + d]);
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxPerLane; i++) {
    const int d = lane + 32 * i;
    if (d < D) a.out[(size_t)t * a.num_heads * D + (size_t)head * D + d] = __float2bfloat16(sum > 0.f ? acc[i] / sum : 0.f);
  }
}

}  // namespace

lp_status launch_attention_simple(const AttnArgs &a, const StepMeta &m, int tokens, int seqs,
                                  cudaStream_t stream) {
  LP_REQUIRE(tokens > 0 && seqs > 0 && a.head_dim > 0 && a.head_dim <= 32 * kMaxPerLane,
             "simple attention: bad shape tokens=%d seqs=%d head_dim=%d", tokens, seqs, a.head_dim);
  const dim3 grid(tokens, (a.num_heads + kWarps - 1) / kWarps);
  return launch_kernel(simple_attention_kernel, grid, kWarps * 32, 0, stream, a, m, seqs);
}
