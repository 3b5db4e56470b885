// Paged decode attention (one query token per sequence), flash-decoding style: the grid is
// (sequence, kv head, split); each CTA reads its slice of the context once for all query heads of
// its GQA group and leaves an unnormalized partial (or the final output when there is one split).
// The splits of one (sequence, kv head) form a thread block cluster: each leaves its partial in
// shared memory and, after one cluster barrier, the cluster merges them in split order by reading
// its peers' shared memory, so partials never round-trip through global memory and no CTA waits
// for a last one to finish. The split count depends only on the batch size, so a graph captured
// for a batch size serves every context length. The kv heads of a sequence are adjacent in the
// grid's launch order, so the CTAs that read the rows of the same tokens (the cache is laid out
// slot, kv head, dim) run side by side: at large batches that streams the cache faster than
// launching the sequences of one head together.
#include <cooperative_groups.h>

#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"
#include "rope_rotate.cuh"

namespace {

const int kWarps = 4;
// At most one (sequence, kv head) pair per kFewPairSms SMs (batch 1 of Qwen3-0.6B's 8 kv heads on
// an H200): 8 splits of 8-warp CTAs instead of 16 of 4 warps, so half as many CTAs in clusters half
// as large, and a thread's share of the context is the same; fewer or more splits, or 8 splits
// of 4 warps, made the step slower.
const int kWarpsFew = 8, kSplitsFew = 8, kFewPairSms = 16;
// Tokens in flight per lane group: 4, or 8 (a 64-token split in one batch of loads) when the
// grid runs in one wave, where a CTA's latency is the step's, and the group is small enough
// for the registers (more registers cost occupancy when CTAs queue in several waves).
const int kUnrollWide = 8, kUnrollNarrow = 4;
const int kWideMaxGroup = 2;
const float kLog2e = 1.4426950408889634f;
const float kNoScore = -1e30f;   // finite "minus infinity": exp2 of differences never yields NaN

const size_t kMaxPrefetchBytes = 16u << 20;  // K/V pulled into L2 ahead of use, all CTAs together

// Output element d of query head h of kv head kvh's group: O / L, normalized (0 for no keys).
template <int D>
__device__ __forceinline__ void store_out(const AttnArgs &a, int tok, int kvh, int G, int h, int d, float O, float L) {
  a.out[(size_t)tok * a.num_heads * D + (size_t)(kvh * G + h) * D + d] = __float2bfloat16(L > 0.f ? O / L : 0.f);
}

template <int D, int MAXG, int kUnroll, bool PRELOAD, int WARPS, bool PIPE>
__global__ __launch_bounds__(WARPS * 32) void decode_kernel(AttnArgs a, StepMeta m, int splits) {
  constexpr int LANES = D / 8;                    // lanes sharing one token row (16 bytes each)
  constexpr int GROUPS = WARPS * (32 / LANES);    // token rows processed side by side
  __shared__ float s_acc[GROUPS][MAXG][D];
  __shared__ float s_ml[GROUPS][MAXG][2];
  __shared__ float s_fin[MAXG][2];  // this split's (max, sum) per head, read by the cluster

  const int kvh = blockIdx.x, di = blockIdx.y, split = blockIdx.z;
  const int seq = m.decode_seqs[di];
  const int G = a.num_heads / a.num_kv_heads;
  const int cl = m.context_lens[seq], tok = m.query_start[seq];
  const int *bt = m.block_tables + (size_t)seq * m.header[META_BT_STRIDE];
  const int chunk = (cl + splits - 1) / splits;
  const int lo = split * chunk, hi = min(cl, lo + chunk);
  const int lane = threadIdx.x & 31, li = lane % LANES;
  const int grp = (threadIdx.x >> 5) * (32 / LANES) + lane / LANES;
  const size_t slot_elems = (size_t)a.num_kv_heads * D;
  const int bs_mask = (1 << a.block_size_log2) - 1;

  // The cached context and the block table do not depend on the previous kernels (the slot this
  // step writes is refreshed in L2 by that write): pull this CTA's rows into L2 while they drain.
  // Only while it all fits in L2 with room to spare: large batches would evict their own rows.
  pdl_trigger();
  constexpr int BATCH = GROUPS * kUnroll;  // context tokens per round of loads
  // One round of this lane's K/V rows starting at token `base` (zeros past hi).
  auto load_batch = [&](int base, uint4 (&kr)[kUnroll], uint4 (&vr)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int j = base + u * GROUPS + grp;
      if (j < hi) {
        const size_t slot = ((size_t)bt[j >> a.block_size_log2] << a.block_size_log2) | (size_t)(j & bs_mask);
        const size_t off = slot * slot_elems + (size_t)kvh * D + li * 8;
        kr[u] = *reinterpret_cast<const uint4 *>(a.k_cache + off);
        vr[u] = *reinterpret_cast<const uint4 *>(a.v_cache + off);
      } else {
        kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  uint4 kr[kUnroll], vr[kUnroll];
  // With the fused prologue no earlier kernel of this step writes the cache (this kernel writes
  // the new token's row and uses it from registers): PRELOAD loads the first round before the wait.
  const bool preloaded = PRELOAD && a.fused_prologue;
  if (preloaded) load_batch(lo, kr, vr);
  if ((size_t)gridDim.x * gridDim.y * gridDim.z * chunk * D * 4 <= kMaxPrefetchBytes) {
    for (int j = lo + (preloaded ? BATCH : 0) + (int)threadIdx.x; j < hi; j += blockDim.x) {
      const size_t slot = ((size_t)bt[j >> a.block_size_log2] << a.block_size_log2) | (size_t)(j & bs_mask);
      prefetch_l2(a.k_cache + slot * slot_elems + (size_t)kvh * D, D * 2);
      prefetch_l2(a.v_cache + slot * slot_elems + (size_t)kvh * D, D * 2);
    }
  }
  // The head-norm weights are constants: read before the wait.
  const bool q_norm = a.fused_prologue && a.q_norm, k_norm = a.fused_prologue && a.k_norm;
  const uint4 q_norm_w = q_norm ? *reinterpret_cast<const uint4 *>(a.q_norm + li * 8) : make_uint4(0, 0, 0, 0);
  const uint4 k_norm_w = k_norm ? *reinterpret_cast<const uint4 *>(a.k_norm + li * 8) : make_uint4(0, 0, 0, 0);
  pdl_wait();

  // Every load of this step's values is issued before any is used: q of the group's heads, the
  // rotation of this lane's elements, and (the split holding this token's position) its K and V.
  // Under the weight traffic of the kernels behind this one each round trip to L2 is long.
  const int last = cl - 1;
  const bool owns_new = a.fused_prologue && lo <= last && last < hi;
  const bf16 *tq = a.qkv + (size_t)tok * a.qkv_stride;
  uint4 q_raw[MAXG], k_raw = make_uint4(0, 0, 0, 0), v_raw = k_raw;
#pragma unroll
  for (int h = 0; h < MAXG; h++)
    q_raw[h] = h < G ? *reinterpret_cast<const uint4 *>(tq + (size_t)(kvh * G + h) * D + li * 8) : make_uint4(0, 0, 0, 0);
  if (owns_new) {
    const bf16 *kp = tq + (size_t)(a.num_heads + kvh) * D + li * 8;
    k_raw = *reinterpret_cast<const uint4 *>(kp);
    v_raw = *reinterpret_cast<const uint4 *>(kp + (size_t)a.num_kv_heads * D);
  }
  float2 c[8];
  if (a.fused_prologue) load_rope_pairs<LANES>(a.cos_sin, tok, li, c);
  float q[MAXG][8], acc[MAXG][8], mx[MAXG], l[MAXG];
#pragma unroll
  for (int h = 0; h < MAXG; h++) {
    mx[h] = kNoScore, l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; e++) q[h][e] = 0.f, acc[h][e] = 0.f;
    if (h < G) {
      bf16x8_to_f32(q_raw[h], q[h]);
      if (a.fused_prologue) head_norm_rope<LANES>(q[h], li, q_norm, q_norm_w, a.eps, c, 0xffffffffu);
#pragma unroll
      for (int e = 0; e < 8; e++) q[h][e] *= a.scale * kLog2e;
    }
  }
  // Fused prologue: the split holding this token's position builds its K (normed, rotated) and V,
  // uses them for that position instead of reading the cache, and its first lane group stores
  // them. The condition is the same for the whole CTA, so the shuffles inside are safe.
  uint4 k_new = make_uint4(0, 0, 0, 0), v_new = k_new;
  if (owns_new) {
    float kf[8];
    bf16x8_to_f32(k_raw, kf);
    head_norm_rope<LANES>(kf, li, k_norm, k_norm_w, a.eps, c, 0xffffffffu);
    k_new = f32_to_bf16x8(kf);
    v_new = v_raw;
    const int slot = m.slots[tok];
    if (grp == 0 && slot >= 0) {
      const size_t off = (size_t)slot * slot_elems + (size_t)kvh * D + li * 8;
      *reinterpret_cast<uint4 *>(a.k_cache_w + off) = k_new;
      *reinterpret_cast<uint4 *>(a.v_cache_w + off) = v_new;
    }
  }

  // Warp-uniform trip count (the shuffles below need every lane), per-group validity.
  if (PIPE && !preloaded) load_batch(lo, kr, vr);
  for (int base = lo; base < hi; base += BATCH) {
    if (!PIPE && (base != lo || !preloaded)) load_batch(base, kr, vr);
    // PIPE: the next round's loads are in flight while this round computes.
    uint4 kn[kUnroll], vn[kUnroll];
    if (PIPE && base + BATCH < hi) load_batch(base + BATCH, kn, vn);
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int j = base + u * GROUPS + grp;
      valid[u] = j < hi;
      if (owns_new && j == last) kr[u] = k_new, vr[u] = v_new;
    }
    float s[MAXG][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      float kf[8];
      bf16x8_to_f32(kr[u], kf);
#pragma unroll
      for (int h = 0; h < MAXG; h++) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++) d = fmaf(q[h][e], kf[e], d);
#pragma unroll
        for (int o = LANES / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        s[h][u] = valid[u] ? d : kNoScore;
      }
    }
#pragma unroll
    for (int h = 0; h < MAXG; h++) {
      if (h >= G) break;
      float mnew = mx[h];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) mnew = fmaxf(mnew, s[h][u]);
      const float alpha = exp2f(mx[h] - mnew);
      mx[h] = mnew;
      l[h] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; e++) acc[h][e] *= alpha;
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const float p = valid[u] ? exp2f(s[h][u] - mnew) : 0.f;
        l[h] += p;
        float vf[8];
        bf16x8_to_f32(vr[u], vf);
#pragma unroll
        for (int e = 0; e < 8; e++) acc[h][e] = fmaf(p, vf[e], acc[h][e]);
      }
    }
    if (PIPE) {
#pragma unroll
      for (int u = 0; u < kUnroll; u++) kr[u] = kn[u], vr[u] = vn[u];
    }
  }

#pragma unroll
  for (int h = 0; h < MAXG; h++) {
    if (h >= G) break;
#pragma unroll
    for (int e = 0; e < 8; e++) s_acc[grp][h][li * 8 + e] = acc[h][e];
    if (li == 0) s_ml[grp][h][0] = mx[h], s_ml[grp][h][1] = l[h];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int h = idx / D, d = idx % D;
    float M = kNoScore;
    for (int g = 0; g < GROUPS; g++) M = fmaxf(M, s_ml[g][h][0]);
    float L = 0.f, O = 0.f;
    for (int g = 0; g < GROUPS; g++) {
      const float w = exp2f(s_ml[g][h][0] - M);
      L += s_ml[g][h][1] * w;
      O += s_acc[g][h][d] * w;
    }
    if (splits == 1) {
      store_out<D>(a, tok, kvh, G, h, d, O, L);
    } else {
      s_acc[0][h][d] = O;  // only this thread reads [*][h][d]
      if (d == 0) s_fin[h][0] = M, s_fin[h][1] = L;
    }
  }
  if (splits == 1) return;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's partial is in its shared memory
  const int rank = (int)cluster.block_rank();
  for (int idx = rank * blockDim.x + threadIdx.x; idx < G * D; idx += splits * blockDim.x) {
    const int h = idx / D, d = idx % D;
    // Every peer's values are loaded before any is summed: one round trip, not one per split.
    float pm[LP_MAX_DECODE_SPLITS], pl[LP_MAX_DECODE_SPLITS], po[LP_MAX_DECODE_SPLITS];
#pragma unroll
    for (int p = 0; p < LP_MAX_DECODE_SPLITS; p++) {
      if (p >= splits) break;
      const float *fin = cluster.map_shared_rank(&s_fin[h][0], p);
      pm[p] = fin[0], pl[p] = fin[1];
      po[p] = *cluster.map_shared_rank(&s_acc[0][h][d], p);
    }
    float M = kNoScore;
#pragma unroll
    for (int p = 0; p < LP_MAX_DECODE_SPLITS; p++)
      if (p < splits) M = fmaxf(M, pm[p]);
    float L = 0.f, O = 0.f;
#pragma unroll
    for (int p = 0; p < LP_MAX_DECODE_SPLITS; p++) {
      if (p >= splits) break;
      const float w = exp2f(pm[p] - M);
      L += pl[p] * w;
      O += po[p] * w;
    }
    store_out<D>(a, tok, kvh, G, h, d, O, L);
  }
  // The peers are done reading this CTA's shared memory before it exits. A relaxed arrive: this
  // CTA publishes nothing, so its output stores need not complete before the barrier.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

typedef void (*DecodeKernel)(AttnArgs, StepMeta, int);

// The kernel variants: tokens in flight per lane group, whether the first round of K/V is loaded
// before the PDL wait (half again as many registers, so only while every CTA has an SM to itself:
// more CTAs would not all be resident while the previous kernel drains), the CTA's warps, and
// whether each round's loads are issued before the previous round computes (see pipelined()).
enum class Variant { kNarrow, kNarrowPipe, kWide, kWidePreload, kFewPreload };

template <int D>
DecodeKernel pick_group(int group, Variant v) {
  if (group <= 2 && v == Variant::kFewPreload)
    return group <= 1 ? decode_kernel<D, 1, kUnrollWide, true, kWarpsFew, false>
                      : decode_kernel<D, 2, kUnrollWide, true, kWarpsFew, false>;
  if (group <= 2 && v == Variant::kWidePreload)
    return group <= 1 ? decode_kernel<D, 1, kUnrollWide, true, kWarps, false>
                      : decode_kernel<D, 2, kUnrollWide, true, kWarps, false>;
  if (group <= 2 && v == Variant::kWide)
    return group <= 1 ? decode_kernel<D, 1, kUnrollWide, false, kWarps, false>
                      : decode_kernel<D, 2, kUnrollWide, false, kWarps, false>;
  if (v == Variant::kNarrowPipe) {
    if (group <= 1) return decode_kernel<D, 1, kUnrollNarrow, false, kWarps, true>;
    if (group <= 2) return decode_kernel<D, 2, kUnrollNarrow, false, kWarps, true>;
    if (group <= 4) return decode_kernel<D, 4, kUnrollNarrow, false, kWarps, true>;
    return decode_kernel<D, 8, kUnrollNarrow, false, kWarps, true>;
  }
  if (group <= 1) return decode_kernel<D, 1, kUnrollNarrow, false, kWarps, false>;
  if (group <= 2) return decode_kernel<D, 2, kUnrollNarrow, false, kWarps, false>;
  if (group <= 4) return decode_kernel<D, 4, kUnrollNarrow, false, kWarps, false>;
  return decode_kernel<D, 8, kUnrollNarrow, false, kWarps, false>;
}

// See kWarpsFew.
bool few_pairs(long pairs, int group, int num_sms) {
  return group <= kWideMaxGroup && pairs * kFewPairSms <= num_sms;
}

// Splits of each (sequence, kv head) pair: enough CTAs for two per SM, or kSplitsFew for few pairs.
// It depends only on the batch size, so a graph captured for a batch size serves every context.
int decode_splits(int num_decode, int kv_heads, int group, int num_sms) {
  const int pairs = num_decode * kv_heads;
  if (few_pairs(pairs, group, num_sms)) return kSplitsFew;
  const int splits = (2 * num_sms + pairs - 1) / pairs;
  return splits < 1 ? 1 : splits > LP_MAX_DECODE_SPLITS ? LP_MAX_DECODE_SPLITS : splits;
}

DecodeKernel pick(int head_dim, int group, Variant v) {
  static_assert(kWideMaxGroup == 2, "pick_group instantiates the wide variants for groups 1 and 2");
  return head_dim == 64 ? pick_group<64>(group, v) : head_dim == 128 ? pick_group<128>(group, v) : pick_group<256>(group, v);
}

// CTAs of the narrow variants an SM holds at once (registers and shared memory permitting), per
// head size (64, 128, 256), group (1, 2, 4, 8) and pipelining; filled by the configure call.
int g_narrow_resident[3][4][2];

int dim_index(int head_dim) { return head_dim == 64 ? 0 : head_dim == 128 ? 1 : 2; }
int group_index(int group) { return group <= 1 ? 0 : group <= 2 ? 1 : group <= 4 ? 2 : 3; }

// A grid of at least kManyWaves waves: its last, partial wave is a small part of it.
const int kManyWaves = 3;

// Clusters of `splits` narrow CTAs (pipelined or not) the device holds at once, per head size,
// group and split count, looked up on first use (0: not yet). A cluster's CTAs share a GPC, so
// fewer fit than CTAs per SM times SMs suggests.
int g_narrow_clusters[3][4][LP_MAX_DECODE_SPLITS + 1][2];

int resident_clusters(int head_dim, int group, int splits, bool piped) {
  int &n = g_narrow_clusters[dim_index(head_dim)][group_index(group)][splits][piped];
  if (n > 0) return n;
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = (unsigned)splits;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1, 1, splits);
  cfg.blockDim = dim3(kWarps * 32);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  if (cudaOccupancyMaxActiveClusters(&n, pick(head_dim, group, piped ? Variant::kNarrowPipe : Variant::kNarrow),
                                     &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 1;
  }
  return n = n < 1 ? 1 : n;
}

// The pipelined narrow variant keeps two rounds of K/V loads in flight per CTA, but with the
// registers that takes fewer of its CTAs fit an SM: it pays where the whole grid is resident at
// once anyway (more bytes in flight per SM), or where the grid is many waves of either variant,
// and loses where it would add a wave. Units: clusters (one per pair) when split, else CTAs.
bool pipelined(long pairs, int splits, int head_dim, int group, int num_sms) {
  long pipe, plain;
  if (splits > 1) {
    pipe = resident_clusters(head_dim, group, splits, true), plain = resident_clusters(head_dim, group, splits, false);
  } else {
    const int *resident = g_narrow_resident[dim_index(head_dim)][group_index(group)];
    pipe = (long)resident[1] * num_sms, plain = (long)resident[0] * num_sms;
  }
  return pairs <= pipe || pairs >= kManyWaves * plain;
}

}  // namespace

bool attention_decode_supported(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 && group <= 8;
}

lp_status attention_decode_configure(void) {
  // The splits of a (sequence, kv head) are one cluster: up to 16 CTAs, past the portable 8.
  static_assert(LP_MAX_DECODE_SPLITS <= 16, "a thread block cluster holds at most 16 CTAs");
  const int groups[] = {1, 2, 4, 8}, dims[] = {64, 128, 256};
  for (int g : groups)
    for (int d : dims)
      for (Variant v :
           {Variant::kNarrow, Variant::kNarrowPipe, Variant::kWide, Variant::kWidePreload, Variant::kFewPreload})
        CUDA_CHECK(cudaFuncSetAttribute(pick(d, g, v), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int g : groups)
    for (int d : dims)
      for (int piped = 0; piped < 2; piped++) {
        int n = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, pick(d, g, piped ? Variant::kNarrowPipe : Variant::kNarrow), kWarps * 32, 0));
        g_narrow_resident[dim_index(d)][group_index(g)][piped] = n < 1 ? 1 : n;
      }
  return LP_OK;
}

lp_status launch_attention_decode(const AttnArgs &a, const StepMeta &m, int num_decode, int num_sms,
                                  cudaStream_t stream) {
  const int group = a.num_heads / a.num_kv_heads;
  LP_REQUIRE(num_decode > 0 && attention_decode_supported(a.head_dim, group),
             "decode attention: unsupported num_decode=%d head_dim=%d group=%d", num_decode, a.head_dim, group);
  LP_REQUIRE(num_decode <= 65535, "decode attention: %d sequences exceed the grid's y limit", num_decode);
  const int splits = decode_splits(num_decode, a.num_kv_heads, group, num_sms);
  const long pairs = (long)num_decode * a.num_kv_heads, ctas = pairs * splits;
  // Wide: one wave of the 128-thread kernel.
  const Variant narrow =
      pipelined(pairs, splits, a.head_dim, group, num_sms) ? Variant::kNarrowPipe : Variant::kNarrow;
  const Variant v = few_pairs(pairs, group, num_sms)               ? Variant::kFewPreload
                    : group > kWideMaxGroup || ctas > 2L * num_sms ? narrow
                    : ctas <= num_sms                              ? Variant::kWidePreload
                                                                   : Variant::kWide;
  const int warps = v == Variant::kFewPreload ? kWarpsFew : kWarps;
  LP_TRY(launch_kernel_clustered(pick(a.head_dim, group, v), dim3(a.num_kv_heads, num_decode, splits), warps * 32,
                                 dim3(1, 1, splits), 0, stream, a, m, splits));
  return LP_OK;
}
