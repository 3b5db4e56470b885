// On-device sampling, exactly lmpool.h's lp_step specification: greedy argmax; otherwise
// z = logit / temperature, top-k and top-p as thresholds on z found by radix selection over the
// order-preserving integer key of z (8-bit digits, four passes each, no sort), then the argmax of
// z + Gumbel noise from the counter-based splitmix64 hash. Probability mass is summed in 40-bit
// fixed point with integer atomics, so results do not depend on thread order.
// The max, its index and the sum of exp (greedy and every logprob) are computed over `parts`
// slices of the row by as many CTAs; the last of a row to finish merges them (lowest index on
// ties) and, for a sampled row, runs the top-k/top-p selection over the whole row alone. At small
// batches a greedy step so reads its logits with the whole GPU instead of one SM per row. When
// the LM head ran as the decode GEMV, its CTAs left these stats for the rows they wrote, and one
// CTA per row merges them instead (the greedy token and every logprob then read no logits at all).
// Sampling controls run in the row's last CTA: top logprobs from the raw row (k block-wide argmax
// passes), then, for a row whose controls change its logits, a processed copy of the row
// (allowed, banned, bias, penalties) that the greedy argmax or the sampler reads; min_p excludes
// tokens as they are read, like top-k and top-p.
#include <math.h>

#include "../common/mix64.h"
#include "../common/sampling_controls.h"
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

const int kThreads = 1024;
const float kFixedOne = 1099511627776.f;  // 2^40: fixed-point unit of probability mass

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct SampleShared {
  unsigned int count[256];
  unsigned long long mass[256];
  unsigned long long total;
  unsigned int sel, remaining;
  unsigned long long above;
  float f[33];  // block_argmax's per-warp values; block_sum's scratch
  int idx[32];
};

// Block-wide (max value, lowest index) over per-thread candidates; every thread gets the result.
__device__ void block_argmax(float &v, int &i, SampleShared &sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) sh.f[warp] = v, sh.idx[warp] = i;
  __syncthreads();
  v = sh.f[0], i = sh.idx[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); w++)
    if (sh.f[w] > v || (sh.f[w] == v && sh.idx[w] < i)) v = sh.f[w], i = sh.idx[w];
  __syncthreads();
}

// Adds `w` (< 2^40) to mass[bin] once per group of lanes sharing the bin (bin < 0: nothing).
__device__ __forceinline__ void add_mass(int bin, unsigned long long w, SampleShared &sh) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const unsigned hi = __reduce_add_sync(peers, (unsigned)(w >> 20));
  const unsigned lo = __reduce_add_sync(peers, (unsigned)(w & 0xFFFFFu));
  if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(&sh.mass[bin], ((unsigned long long)hi << 20) + lo);
}

__device__ __forceinline__ void add_count(int bin, SampleShared &sh) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&sh.count[bin], __popc(peers));
}

// z = logit / temperature of a row as the sampler reads it: tokens min_p drops (exp(z - zmax) <
// min_p, compared as logs as the CPU build does) read as -inf. log_min_p = -inf: min_p off.
struct ZView {
  const float *row;
  float temp, zmax, log_min_p;
  __device__ __forceinline__ float z(int i) const {
    const float v = row[i] / temp;
    return v - zmax < log_min_p ? -INFINITY : v;
  }
};

// Key of the k-th largest z (ties share a key).
__device__ uint32_t select_kth(const ZView &zv, int vocab, int k, SampleShared &sh) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) sh.remaining = (unsigned)k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.count[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += blockDim.x) {
      const int i = base + threadIdx.x;
      int bin = -1;
      if (i < vocab) {
        const uint32_t key = order_key(zv.z(i));
        if ((key & mask) == prefix) bin = (int)((key >> shift) & 255u);
      }
      add_count(bin, sh);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned cum = 0, sel = 0;
      for (int b = 255; b >= 0; b--) {
        if (cum + sh.count[b] >= sh.remaining) { sel = (unsigned)b; break; }
        cum += sh.count[b];
      }
      sh.sel = sel;
      sh.remaining -= cum;
    }
    __syncthreads();
    prefix |= sh.sel << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

__device__ __forceinline__ unsigned long long fixed_mass(float z, float zmax) {
  return __float2ull_rz(expf(z - zmax) * kFixedOne);
}

// Key of the top-p cutoff among tokens with key >= floor_key: the largest key whose "z >= key"
// mass reaches target.
__device__ uint32_t select_top_p(const ZView &zv, int vocab, uint32_t floor_key, unsigned long long target,
                                 SampleShared &sh) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) sh.above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.mass[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += blockDim.x) {
      const int i = base + threadIdx.x;
      int bin = -1;
      unsigned long long w = 0;
      if (i < vocab) {
        const float z = zv.z(i);
        const uint32_t key = order_key(z);
        if (key >= floor_key && (key & mask) == prefix) bin = (int)((key >> shift) & 255u), w = fixed_mass(z, zv.zmax);
      }
      add_mass(bin, w, sh);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long cum = 0;
      int sel = -1, lowest = 0;
      for (int b = 255; b >= 0; b--) {
        if (sh.mass[b] == 0) continue;
        lowest = b;
        if (sh.above + cum + sh.mass[b] >= target) { sel = b; break; }
        cum += sh.mass[b];
      }
      if (sel < 0) sel = lowest;  // only reachable through rounding: keep the smallest non-empty bin
      sh.sel = (unsigned)sel;
      sh.above += cum;
    }
    __syncthreads();
    prefix |= sh.sel << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

// Applies f(value, index) to every logit of a row, each thread in increasing index order, with
// four 16-byte loads in flight per thread (one CTA reads the whole row).
template <class F>
__device__ __forceinline__ void for_each_logit(const float *row, int vocab, F f) {
  if (vocab % 4 != 0 || (reinterpret_cast<uintptr_t>(row) & 15) != 0) {
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) f(row[i], i);
    return;
  }
  const float4 *row4 = reinterpret_cast<const float4 *>(row);
  const int v4 = vocab / 4, stride = blockDim.x;
  for (int base = threadIdx.x; base < v4; base += 4 * stride) {
    float4 q[4];
#pragma unroll
    for (int u = 0; u < 4; u++) q[u] = base + u * stride < v4 ? row4[base + u * stride] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = (base + u * stride) * 4;
      if (i >= vocab) break;
      f(q[u].x, i);
      f(q[u].y, i + 1);
      f(q[u].z, i + 2);
      f(q[u].w, i + 3);
    }
  }
}

// Max (lowest index on ties) and sum of exp(v - max) over row[lo, hi); every thread gets them.
__device__ void slice_stats(const float *row, int lo, int hi, float &vmax, int &arg, float &sum, SampleShared &sh) {
  vmax = -INFINITY, arg = 0x7fffffff;
  const int n = hi > lo ? hi - lo : 0;
  for_each_logit(row + lo, n, [&](float v, int i) {
    if (v > vmax) vmax = v, arg = i + lo;
  });
  block_argmax(vmax, arg, sh);
  float se = 0.f;
  const float mx = vmax;
  if (n > 0) for_each_logit(row + lo, n, [&](float v, int) { se += __expf(v - mx); });
  sum = block_sum(se, sh.f);
}

// The same over n partial stats (max, sum of exp(v - max), argmax bits) of one row: the slices'
// or the LM head CTAs'. Read from L2: other CTAs wrote them.
__device__ __forceinline__ void merge_stats(const float4 *stats, int n, float &vmax, int &arg, float &sum, SampleShared &sh) {
  vmax = -INFINITY, arg = 0x7fffffff;
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    const float4 q = __ldcg(stats + p);
    const int qi = __float_as_int(q.z);
    if (q.x > vmax || (q.x == vmax && qi < arg)) vmax = q.x, arg = qi;
  }
  block_argmax(vmax, arg, sh);
  float se = 0.f;
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    const float4 q = __ldcg(stats + p);
    if (q.y > 0.f) se += q.y * __expf(q.x - vmax);
  }
  sum = block_sum(se, sh.f);
}

// The k highest raw logits of a row (k passes of a block-wide argmax, each below the last pick in
// (value descending, index ascending) order; NaN never ranks), written as logit - lse: the order
// and the formula of the chosen token's logprob. Fewer than k ranked: the rest -1 / NaN.
__device__ void top_logprobs_raw(const float *row, int vocab, int k, float lse, int32_t *ids, float *lps,
                                 SampleShared &sh) {
  float pv = INFINITY;
  int pi = -1;
  for (int j = 0; j < k; j++) {
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float v = row[i];
      const bool after = v < pv || (v == pv && i > pi);
      if (after && (v > best || (v == best && i < bi))) best = v, bi = i;
    }
    block_argmax(best, bi, sh);  // every thread gets the same pick
    if (bi == 0x7fffffff) {
      for (int q = j + threadIdx.x; q < k; q += blockDim.x) ids[q] = -1, lps[q] = NAN;
      return;
    }
    if (threadIdx.x == 0) ids[j] = bi, lps[j] = best - lse;
    pv = best, pi = bi;
  }
}

// Row r's processed logits (lmpool.h's order: allowed, banned, bias, penalties) into proc. The
// bias runs on one thread, so a repeated id adds in order as on the CPU; penalty ids are distinct.
__device__ void process_row(const float *row, float *proc, int vocab, const StepMeta &m, int r,
                            const int32_t *lists) {
  const int32_t *h = m.header;
  const int a0 = m.allowed_start[r], a1 = m.allowed_start[r + 1];
  const int32_t *allowed = lists + h[META_ALLOWED_IDS];
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) proc[i] = a1 > a0 ? -INFINITY : row[i];
  __syncthreads();
  for (int j = a0 + threadIdx.x; j < a1; j += blockDim.x) proc[allowed[j]] = row[allowed[j]];
  __syncthreads();
  const int32_t *banned = lists + h[META_BANNED_IDS];
  for (int j = m.banned_start[r] + threadIdx.x; j < m.banned_start[r + 1]; j += blockDim.x) proc[banned[j]] = -INFINITY;
  __syncthreads();
  if (threadIdx.x == 0) {
    const int32_t *ids = lists + h[META_BIAS_IDS];
    const float *values = reinterpret_cast<const float *>(lists + h[META_BIAS_VALUES]);
    for (int j = m.bias_start[r]; j < m.bias_start[r + 1]; j++) proc[ids[j]] += values[j];
  }
  __syncthreads();
  const float rep = m.repetition[r], freq = m.frequency[r], pres = m.presence[r];
  if (rep != 1.f || freq != 0.f || pres != 0.f) {
    const int32_t *ids = lists + h[META_PENALTY_IDS], *counts = lists + h[META_PENALTY_COUNTS];
    for (int j = m.penalty_start[r] + threadIdx.x; j < m.penalty_start[r + 1]; j += blockDim.x)
      proc[ids[j]] = lp_penalized_logit(proc[ids[j]], counts[j], rep, freq, pres);
  }
  __syncthreads();
}

// Temperature, min_p, top-k, top-p and the Gumbel sample over a row whose max is smax (finite).
__device__ int sample_row(const float *srow, int vocab, float temp, float smax, const StepMeta &m, int r,
                          SampleShared &sh) {
  const float min_p = m.min_p[r];
  const ZView zv = {srow, temp, smax / temp, min_p > 0.f ? logf(min_p) : -INFINITY};
  const int k = m.top_k[r];
  const float top_p = m.top_p[r];
  uint32_t floor_key = 0;
  if (k > 0 && k < vocab) floor_key = select_kth(zv, vocab, k, sh);
  if (top_p < 1.f) {
    if (threadIdx.x == 0) sh.total = 0;
    __syncthreads();
    unsigned long long mine = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      const float z = zv.z(i);
      if (order_key(z) >= floor_key) mine += fixed_mass(z, zv.zmax);
    }
    atomicAdd(&sh.total, mine);
    __syncthreads();
    unsigned long long target = (unsigned long long)ceil((double)top_p * (double)sh.total);
    if (target < 1) target = 1;
    floor_key = select_top_p(zv, vocab, floor_key, target, sh);
  }
  const int pos = m.positions[m.sample_index[r]];
  const unsigned long long base = lp_sample_noise_key(m.seed[r], pos);
  float best = -INFINITY;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float z = zv.z(i);
    if (order_key(z) < floor_key || z == -INFINITY) continue;
    const unsigned long long h = lp_mix64(base ^ (unsigned long long)i);
    const float u = (float)(((double)(h >> 40) + 0.5) * (1.0 / 16777216.0));
    const float v = z - logf(-logf(u));
    if (v > best) best = v, best_i = i;
  }
  block_argmax(best, best_i, sh);
  return best_i == 0x7fffffff ? -1 : best_i;
}

__global__ __launch_bounds__(kThreads, 1) void sampling_kernel(const float *logits, int vocab, StepMeta m,
                                                            SamplingBuffers o, float4 *parts, int32_t *counters,
                                                            const float4 *head_stats, int head_parts) {
  __shared__ SampleShared sh;
  __shared__ int s_last;
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x, nparts = gridDim.y, part = blockIdx.y;
  const float *row = logits + (size_t)r * vocab;

  // This CTA's slice (a multiple of 4 long, so slices stay 16-byte aligned), then the merge.
  const int slice = ((vocab + nparts - 1) / nparts + 3) & ~3;
  const int lo = part * slice, hi = min(vocab, lo + slice);
  float gmax, total;
  int garg;
  if (head_stats) {
    merge_stats(head_stats + (size_t)r * head_parts, head_parts, gmax, garg, total, sh);
  } else {
    slice_stats(row, lo, hi, gmax, garg, total, sh);
  }
  if (nparts > 1) {
    if (threadIdx.x == 0) parts[(size_t)r * nparts + part] = make_float4(gmax, total, __int_as_float(garg), 0.f);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      s_last = atomicAdd(counters + r, 1) == nparts - 1;
      if (s_last) counters[r] = 0;  // ready for the next step
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    merge_stats(parts + (size_t)r * nparts, nparts, gmax, garg, total, sh);
  }
  const float lse = gmax + logf(total);

  const int stride = m.header[META_TOP_STRIDE];
  if (stride > 0) {
    const int k = m.top_logprobs[r];
    int32_t *ids = o.top_ids + (size_t)r * stride;
    float *lps = o.top_logprobs + (size_t)r * stride;
    for (int q = k + threadIdx.x; q < stride; q += blockDim.x) ids[q] = -1, lps[q] = NAN;
    if (k > 0) top_logprobs_raw(row, vocab, k, lse, ids, lps, sh);
  }
  int token = garg, rank = 0;
  const int score = m.score_token[r];
  if (score >= 0) {
    token = score;
    // Its rank (lmpool.h): the tokens whose raw logit is >= its own, counted exactly in fp32.
    const float x = row[score];
    float n = 0.f;
    for_each_logit(row, vocab, [&](float v, int) { n += v >= x ? 1.f : 0.f; });
    rank = (int)block_sum(n, sh.f);
  } else {
    const float *srow = row;
    float smax = gmax;
    const bool processed = (m.row_flags[r] & ROW_PROCESS) != 0;
    if (processed) {
      float *proc = o.processed + (size_t)r * vocab;
      process_row(row, proc, vocab, m, r, o.lists);
      int sarg = 0x7fffffff;
      smax = -INFINITY;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = proc[i];
        if (v > smax) smax = v, sarg = i;
      }
      block_argmax(smax, sarg, sh);
      srow = proc;
      token = smax == -INFINITY ? -1 : sarg;  // every token excluded: the row fails
    }
    const float temp = m.temperature[r];
    if (temp > 0.f) token = smax == -INFINITY ? -1 : sample_row(srow, vocab, temp, smax, m, r, sh);
  }
  if (threadIdx.x == 0) {
    o.out_tokens[r] = token;
    o.out_logprobs[r] = token >= 0 ? row[token] - lse : NAN;
    o.ranks[r] = rank;
  }
}

}  // namespace

int sampling_parts(int rows, int num_sms) {
  const int parts = (2 * num_sms + rows - 1) / rows;
  return parts < 1 ? 1 : parts > LP_SAMPLE_MAX_PARTS ? LP_SAMPLE_MAX_PARTS : parts;
}

lp_status launch_sampling(const float *logits, int rows, int vocab, const StepMeta &m, const SamplingBuffers &out,
                          int parts, float4 *part_stats, int32_t *counters,
                          const float4 *head_stats, int head_parts, cudaStream_t stream) {
  LP_REQUIRE(rows > 0 && vocab > 0, "sampling: bad shape rows=%d vocab=%d", rows, vocab);
  LP_REQUIRE(parts >= 1 && parts <= LP_SAMPLE_MAX_PARTS && (parts == 1 || (part_stats && counters)),
             "sampling: parts=%d", parts);
  LP_REQUIRE(!head_stats || (parts == 1 && head_parts >= 1), "sampling: head stats with parts=%d head_parts=%d",
             parts, head_parts);
  return launch_kernel(sampling_kernel, dim3(rows, parts), kThreads, 0, stream, logits, vocab, m, out, part_stats,
                       counters, head_stats, head_parts);
}
