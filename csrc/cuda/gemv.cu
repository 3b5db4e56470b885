// Fused matrix-vector products for decode batches of up to LP_GEMV_MAX_BATCH tokens. At this size
// a linear layer only streams its weight once, so each kernel does its neighbours' work too and
// saves launches: the residual add or SiLU*mul (epilogue), and for up to LP_GEMV_MAX_TOKENS tokens
// the RMSNorm of the input rows (prologue; more tokens read rows rmsnorm_rows normalized).
//
// The products run on tensor cores (bf16 m16n8k16, fp32 accumulators): a CTA owns a tile of R
// weight rows (the MMA's M side), its warps split k, and the tokens are the N side, eight per MMA.
// What follows the input's arrival is then a few dozen instructions per warp instead of hundreds
// of FMAs and conversions, which at batch 1 is the kernel's critical path (its weights were
// loaded before). Inside each 32-column chunk the column order is permuted, the same way for
// weights and inputs, so the dot products are unchanged: lane (g, t) loads columns [8t, 8t + 8)
// of rows g and g + 8 with one 16-byte load each, which is its A fragment for the chunk's two k16
// steps, and the same eight columns of token g of each group of eight are its B fragments.
#include "device_util.cuh"
#include "launch.cuh"
#include "mma_util.cuh"
#include "ops.cuh"
#include "rope_rotate.cuh"

namespace {

const int kMaxWarps = 16;
const int kWindowChunks = 8;                 // 32-column chunks per window: 8 (R = 8) or 16 loads per lane
const int kMaxWindows = 4;                   // windows per warp: k <= 16 warps * 8 chunks * 32 * 4
const int kMaxSmemBytes = 64 * 1024;         // normalized inputs, bf16 [tokens, k]
const size_t kMaxPrefetchBytes = 32u << 20;  // weights prefetched into L2 (60 MB) ahead of use

// Columns of one warp's slice of k: `windows` windows of kWindowChunks 32-column chunks.
__host__ __device__ constexpr int slice_cols(int windows) { return windows * kWindowChunks * 32; }

// Tiles of n_out outputs (a SiLU*mul tile holds rows / 2 outputs: their gate and up rows).
__host__ __device__ inline int tile_count(int n_out, int rows, bool silu) {
  const int per_tile = silu ? rows / 2 : rows;
  return (n_out + per_tile - 1) / per_tile;
}

// Weight row of tile row i (-1: past the end). SiLU*mul tiles pair R/2 gate rows with their up
// rows, so one thread of the epilogue sees both.
template <int R, int OUT>
__device__ __forceinline__ int tile_row(int tile, int i, int n_out) {
  if (OUT == GEMV_OUT_SILU_MUL) {
    const int half = R / 2, j = tile * half + (i % half);
    return j < n_out ? (i < half ? j : n_out + j) : -1;
  }
  const int r = tile * R + i;
  return r < n_out ? r : -1;
}

// One window of this lane's weights: chunk c at columns col + 32 c of rows ra (and rb when R = 16).
template <int R>
__device__ __forceinline__ void load_window(const GemvArgs &a, int ra, int rb, int col, uint4 (&wa)[kWindowChunks],
                                            uint4 (&wb)[kWindowChunks]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < kWindowChunks; c++) {
    const int kk = col + 32 * c;
    wa[c] = ra >= 0 && kk < a.k ? ld_stream_16(a.w + (size_t)ra * a.k + kk) : zero;
    if (R == 16) wb[c] = rb >= 0 && kk < a.k ? ld_stream_16(a.w + (size_t)rb * a.k + kk) : zero;
  }
}

// The RMS-normalized input rows of this warp's column slice [s0, s0 + slice), as bf16 in `xs`
// ([token][slice]). The warps' slices tile the row, so each warp sums the squares of the values
// it loads, one barrier shares the sums (`ss_part`), and each warp normalizes what it holds. The
// slice's norm weights `nw` (a lane's first two 4-column groups) were read before the wait.
// GEMV_IN_EMBED: the rows are bf16 embedding rows, and CTA 0 also stores them to the residual.
// The loads wait in registers between the passes, which holds a token or two (see
// LP_GEMV_MAX_TOKENS): with more, one round trip per token would run one after another.
template <int NT, int IN>
__device__ __forceinline__ void stage_normed_slice(const GemvArgs &a, int s0, int slice, const uint2 (&nw)[2],
                                                   bf16 *xs, float (*ss_part)[NT]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Column of this lane's q-th 4-column group (-1 outside the slice or the row).
  auto group_col = [&](int q) {
    const int off = 4 * (32 * q + lane), c = s0 + off;
    return off < slice && c < a.k ? c : -1;
  };
  const int groups = slice / 128;  // per lane: 2 per window
  // Columns [c, c + 4) of token tok's input row, as fp32.
  auto load4 = [&](int tok, int c) {
    const size_t row = (size_t)(a.row_map ? a.row_map[tok] : tok) * a.k;
    if constexpr (IN == GEMV_IN_EMBED)
      return bf16x4_to_f32(reinterpret_cast<const uint2 *>(static_cast<const bf16 *>(a.x) + row)[c / 4]);
    return reinterpret_cast<const float4 *>(static_cast<const float *>(a.x) + row)[c / 4];
  };
  auto keep_embedded = [&](int tok, int c, const float4 &x) {
    if (IN == GEMV_IN_EMBED && blockIdx.x == 0)
      reinterpret_cast<float4 *>(a.first.residual + (size_t)tok * a.k)[c / 4] = x;
  };
  static_assert(NT <= LP_GEMV_MAX_TOKENS, "more tokens take GEMV_IN_BF16 inputs");
  float4 v[NT][2];
#pragma unroll
  for (int tok = 0; tok < NT; tok++) {
    if (tok >= a.tokens) break;  // uniform across the CTA
    float4 first[2];
#pragma unroll
    for (int q = 0; q < 2; q++) {
      const int c = group_col(q);
      first[q] = c >= 0 ? load4(tok, c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float ss = 0.f;
#pragma unroll
    for (int q = 0; q < 2; q++) {
      const float4 x = first[q];
      v[tok][q] = x;
      if (group_col(q) >= 0) keep_embedded(tok, group_col(q), x);
      ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    }
    for (int q = 2; q < groups; q++) {  // wide rows (several windows) only
      const int c = group_col(q);
      if (c < 0) continue;
      const float4 x = load4(tok, c);
      keep_embedded(tok, c, x);
      ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    }
    ss = warp_sum(ss);
    if (lane == 0) ss_part[warp][tok] = ss;
  }
  __syncthreads();
#pragma unroll
  for (int tok = 0; tok < NT; tok++) {
    if (tok >= a.tokens) break;
    float ss = 0.f;
#pragma unroll
    for (int w = 0; w < kMaxWarps; w++)
      if (w < warps) ss += ss_part[w][tok];
    const float inv = rsqrtf(ss / (float)a.k + a.eps);
    for (int q = 0; q < groups; q++) {
      const int c = group_col(q);
      if (c < 0) continue;
      const float4 x = q < 2 ? v[tok][q] : load4(tok, c);
      const float4 wf = bf16x4_to_f32(q == 0 ? nw[0] : q == 1 ? nw[1] : *reinterpret_cast<const uint2 *>(a.norm_w + c));
      uint2 out;
      out.x = pack_bf16x2(x.x * inv * wf.x, x.y * inv * wf.y);
      out.y = pack_bf16x2(x.z * inv * wf.z, x.w * inv * wf.w);
      *reinterpret_cast<uint2 *>(xs + (size_t)tok * slice + (c - s0)) = out;
    }
  }
  __syncwarp();
}

// Running (max, sum of exp(y - max), lowest argmax) of one token's outputs, held by the lanes of
// warp 0 that own the token's outputs (lane = row * NT + token).
struct RunningMax {
  float m = -INFINITY, s = 0.f;
  int arg = 0x7fffffff;

  // Folds in one tile: value v of this lane's output idx (-INFINITY: none). Warp 0, all lanes.
  template <int R, int NT>
  __device__ __forceinline__ void fold(float v, int idx) {
    float tm = v;
    int ti = idx;
#pragma unroll
    for (int o = NT; o < R * NT; o <<= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, tm, o);
      const int oi = __shfl_xor_sync(0xffffffffu, ti, o);
      if (ov > tm || (ov == tm && oi < ti)) tm = ov, ti = oi;
    }
    float e = v == -INFINITY ? 0.f : __expf(v - tm);
#pragma unroll
    for (int o = NT; o < R * NT; o <<= 1) e += __shfl_xor_sync(0xffffffffu, e, o);
    if (tm == -INFINITY) return;
    if (tm > m) {  // on ties the earlier tile's (lower) index stays
      s = s * __expf(m - tm) + e, m = tm, arg = ti;
    } else {
      s += e * __expf(tm - m);
    }
  }
};

template <int NT, int R, int IN, int OUT>
__global__ __launch_bounds__(kMaxWarps * 32) void gemv_kernel(GemvArgs a) {
  constexpr int NB = (NT + 7) / 8;                    // MMAs per k16 step: 8 tokens each
  extern __shared__ uint4 smem_x[];                  // normalized inputs: [warp][token][slice] bf16
  __shared__ float partial[2][kMaxWarps][R][NT];     // per-warp sums, double-buffered over tiles
  __shared__ float ss_part[kMaxWarps][NT];           // normalized inputs: per-warp sums of squares
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slice = slice_cols(a.windows), s0 = warp * slice, col = s0 + 8 * t;
  const int tiles = tile_count(a.n_out, R, OUT == GEMV_OUT_SILU_MUL);
  RunningMax run;
  bf16 *xs = reinterpret_cast<bf16 *>(smem_x) + (size_t)warp * NT * slice;

  // Weights depend on nothing earlier kernels write: the first window of the first tile is loaded
  // before waiting for the previous kernel, later tiles' rows are pulled into L2, so the weight
  // latency overlaps the predecessor's tail.
  pdl_trigger();
  int tile = blockIdx.x;
  int ra = tile < tiles ? tile_row<R, OUT>(tile, g, a.n_out) : -1;
  int rb = R == 16 && tile < tiles ? tile_row<R, OUT>(tile, g + 8, a.n_out) : -1;
  uint4 wa[kWindowChunks], wb[kWindowChunks];
  load_window<R>(a, ra, rb, col, wa, wb);
  if (a.prefetch && (int)threadIdx.x < R)
    for (int later = tile + gridDim.x; later < tiles; later += gridDim.x) {
      const int row = tile_row<R, OUT>(later, threadIdx.x, a.n_out);
      if (row >= 0) prefetch_l2(a.w + (size_t)row * a.k, (uint32_t)a.k * 2);
    }
  uint2 nw[2] = {make_uint2(0, 0), make_uint2(0, 0)};
  if (IN != GEMV_IN_BF16)
#pragma unroll
    for (int q = 0; q < 2; q++) {
      const int c = s0 + 4 * (32 * q + lane);
      if (4 * (32 * q + lane) < slice && c < a.k) nw[q] = *reinterpret_cast<const uint2 *>(a.norm_w + c);
    }
  pdl_wait();

  // Epilogue slot j < R * NT is tile row j / NT, token j % NT; thread i takes slots i, i +
  // blockDim.x, ... For the residual add it reads the value its first slot adds to now,
  // alongside the input.
  float y_first = 0.f;
  if (OUT == GEMV_OUT_ADD_F32 && (int)threadIdx.x < R * NT && (int)threadIdx.x % NT < a.tokens && tile < tiles) {
    const int row = tile_row<R, OUT>(tile, (int)threadIdx.x / NT, a.n_out);
    if (row >= 0) y_first = static_cast<const float *>(a.y)[(size_t)(threadIdx.x % NT) * a.ldy + row];
  }
  if constexpr (IN != GEMV_IN_BF16) stage_normed_slice<NT, IN>(a, s0, slice, nw, xs, ss_part);
  if (IN == GEMV_IN_EMBED && blockIdx.x == gridDim.x - 1)
    for (int i = threadIdx.x; i < a.tokens * a.first.half; i += blockDim.x)
      a.first.cos_sin[i] = rope_table_entry(a.first.positions, a.first.inv_freq, a.first.half, i);

  for (int it = 0; tile < tiles; tile += gridDim.x, it++) {
    if (it > 0) {
      ra = tile_row<R, OUT>(tile, g, a.n_out);
      rb = R == 16 ? tile_row<R, OUT>(tile, g + 8, a.n_out) : -1;
    }
    float acc0[NB][4] = {}, acc1[NB][4] = {};  // per 8 tokens: even / odd k16 steps
    for (int win = 0; win < a.windows; win++) {
      const int wcol = col + win * kWindowChunks * 32;
      if (it > 0 || win > 0) load_window<R>(a, ra, rb, wcol, wa, wb);
#pragma unroll
      for (int c = 0; c < kWindowChunks; c++) {
        const int kk = wcol + 32 * c;
        const uint32_t lo[4] = {wa[c].x, R == 16 ? wb[c].x : 0u, wa[c].y, R == 16 ? wb[c].y : 0u};
        const uint32_t hi[4] = {wa[c].z, R == 16 ? wb[c].z : 0u, wa[c].w, R == 16 ? wb[c].w : 0u};
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
          const int tok = 8 * nb + g;
          uint4 b = make_uint4(0, 0, 0, 0);
          if (tok < a.tokens && kk < a.k)
            b = IN != GEMV_IN_BF16
                    ? *reinterpret_cast<const uint4 *>(xs + (size_t)tok * slice + (kk - s0))
                    : *reinterpret_cast<const uint4 *>(static_cast<const bf16 *>(a.x) + (size_t)tok * a.k + kk);
          mma_bf16_16816(acc0[nb], lo, b.x, b.y);
          mma_bf16_16816(acc1[nb], hi, b.z, b.w);
        }
      }
    }
    // Accumulator (row g, token 8 nb + 2t + j) is acc[nb][j], (row g + 8, same token)
    // acc[nb][2 + j].
    float (*part)[R][NT] = partial[it & 1];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int tok = 8 * nb + 2 * t + j;
        if (tok >= NT) continue;
        part[warp][g][tok] = acc0[nb][j] + acc1[nb][j];
        if (R == 16) part[warp][g + 8][tok] = acc0[nb][2 + j] + acc1[nb][2 + j];
      }
    __syncthreads();
    // Fixed-order sum over the warps; then the epilogue.
    auto row_sum = [&](int i, int tok) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < kMaxWarps; w++)
        if (w < warps) s += part[w][i][tok];
      return s;
    };
    if (OUT == GEMV_OUT_SILU_MUL) {
      for (int j = threadIdx.x; j < R / 2 * NT; j += blockDim.x) {
        const int r = j / NT, tok = j % NT, out = tile * (R / 2) + r;
        if (tok >= a.tokens || out >= a.n_out) continue;
        const float gt = round_bf16(row_sum(r, tok)), up = round_bf16(row_sum(r + R / 2, tok));
        static_cast<bf16 *>(a.y)[(size_t)tok * a.ldy + out] = __float2bfloat16(gt / (1.f + __expf(-gt)) * up);
      }
    } else {
      // The trip count is the same for every thread: the row stats' fold shuffles across warp 0.
      for (int j0 = 0; j0 < R * NT; j0 += blockDim.x) {
        const int j = j0 + (int)threadIdx.x, r = j / NT, tok = j % NT;
        float v = -INFINITY;
        int row = -1;
        if (j < R * NT && tok < a.tokens) row = tile_row<R, OUT>(tile, r, a.n_out);
        if (row >= 0) {
          v = row_sum(r, tok);
          const size_t at = (size_t)tok * a.ldy + row;
          if (OUT == GEMV_OUT_BF16) static_cast<bf16 *>(a.y)[at] = __float2bfloat16(v);
          if (OUT == GEMV_OUT_F32) static_cast<float *>(a.y)[at] = v;
          if (OUT == GEMV_OUT_ADD_F32)
            static_cast<float *>(a.y)[at] = (it == 0 && j0 == 0 ? y_first : static_cast<float *>(a.y)[at]) + v;
        }
        if constexpr (OUT == GEMV_OUT_F32 && R * NT <= 32)  // see LP_GEMV_MAX_TOKENS
          if (a.row_stats && warp == 0) run.fold<R, NT>(v, row);
      }
    }
  }
  if (OUT == GEMV_OUT_F32 && a.row_stats && (int)threadIdx.x < NT && (int)threadIdx.x < a.tokens)
    a.row_stats[threadIdx.x * gridDim.x + blockIdx.x] = make_float4(run.m, run.s, __int_as_float(run.arg), 0.f);
}

typedef void (*GemvKernel)(GemvArgs);

// The (input, output) pairs the forward step uses: normalized inputs for up to
// LP_GEMV_MAX_TOKENS tokens, bf16 inputs (normalized by rmsnorm_rows) for more.
template <int NT, int R>
GemvKernel pick(GemvInput in, GemvOutput out) {
  if constexpr (NT <= LP_GEMV_MAX_TOKENS) {
    if (in == GEMV_IN_NORM && out == GEMV_OUT_BF16) return gemv_kernel<NT, R, GEMV_IN_NORM, GEMV_OUT_BF16>;
    if (in == GEMV_IN_EMBED && out == GEMV_OUT_BF16) return gemv_kernel<NT, R, GEMV_IN_EMBED, GEMV_OUT_BF16>;
    if (in == GEMV_IN_NORM && out == GEMV_OUT_F32) return gemv_kernel<NT, R, GEMV_IN_NORM, GEMV_OUT_F32>;
    if (in == GEMV_IN_NORM && out == GEMV_OUT_SILU_MUL) return gemv_kernel<NT, R, GEMV_IN_NORM, GEMV_OUT_SILU_MUL>;
  } else {
    if (in == GEMV_IN_BF16 && out == GEMV_OUT_BF16) return gemv_kernel<NT, R, GEMV_IN_BF16, GEMV_OUT_BF16>;
    if (in == GEMV_IN_BF16 && out == GEMV_OUT_SILU_MUL) return gemv_kernel<NT, R, GEMV_IN_BF16, GEMV_OUT_SILU_MUL>;
  }
  if (in == GEMV_IN_BF16 && out == GEMV_OUT_ADD_F32) return gemv_kernel<NT, R, GEMV_IN_BF16, GEMV_OUT_ADD_F32>;
  return nullptr;
}

// Token counts the kernels are instantiated for: a batch runs at the next one up. Past two
// tokens the MMA's N side (8) is the unit, so 3-8 tokens cost one instance, 9-16 another.
const int kTokenCounts[] = {1, 2, 8, 16};
static_assert(LP_GEMV_MAX_BATCH == 16, "kTokenCounts ends at LP_GEMV_MAX_BATCH");
// The LM head's row stats are folded across the lanes of warp 0, one per (row, token) of a tile,
// so they need R * NT <= 32: two tokens at most.
static_assert(LP_GEMV_MAX_TOKENS == 2, "row stats are folded for at most two tokens");
int padded_tokens(int tokens) {
  for (int nt : kTokenCounts)
    if (tokens <= nt) return nt;
  return -1;
}

template <int R>
GemvKernel pick_rows(GemvInput in, GemvOutput out, int nt) {
  switch (nt) {
    case 1: return pick<1, R>(in, out);
    case 2: return pick<2, R>(in, out);
    case 8: return pick<8, R>(in, out);
    case 16: return pick<16, R>(in, out);
    default: return nullptr;
  }
}

GemvKernel pick_kernel(GemvInput in, GemvOutput out, int nt, int rows) {
  return rows == 16 ? pick_rows<16>(in, out, nt) : pick_rows<8>(in, out, nt);
}

// How a row of k columns is split: tile rows, warps, and windows per warp.
struct GemvSplit {
  int rows, warps, windows;
};

// Tiles of 16 rows while one window per warp covers k (k <= 4096); beyond, 8 rows (the MMA's
// rows 8-15 are zero) so that a lane's several windows hold half as many registers each.
// Wide windows (16 weight registers per lane) rather than more warps: the weights a CTA holds
// in registers before its wait then take less of the register file beside the per-thread state,
// so more of the next kernel's CTAs fit next to the running one and start their loads early
// (narrower 4-chunk windows of 16 rows for k <= 1024 made the step slower).
GemvSplit gemv_split(int k) {
  const int chunks = k / 32;
  if (chunks <= kMaxWarps * kWindowChunks) return {16, (chunks + kWindowChunks - 1) / kWindowChunks, 1};
  const int windows = (chunks + kMaxWarps * kWindowChunks - 1) / (kMaxWarps * kWindowChunks);
  return {8, (chunks + windows * kWindowChunks - 1) / (windows * kWindowChunks), windows};
}

// Normalized inputs: shared memory for the slices of every warp.
size_t norm_smem_bytes(const GemvSplit &s, int nt) {
  return (size_t)s.warps * nt * slice_cols(s.windows) * 2;
}

}  // namespace

bool gemv_fits(int tokens, int k, GemvInput in) {
  if (tokens < 1 || tokens > LP_GEMV_MAX_BATCH || k < 32 || k % 32 != 0) return false;
  if (in != GEMV_IN_BF16 && tokens > LP_GEMV_MAX_TOKENS) return false;
  const GemvSplit s = gemv_split(k);
  if (s.windows > kMaxWindows) return false;
  return in == GEMV_IN_BF16 || norm_smem_bytes(s, padded_tokens(tokens)) <= (size_t)kMaxSmemBytes;
}

bool gemv_head_fits(int rows, int k) { return rows <= LP_GEMV_MAX_TOKENS && gemv_fits(rows, k, GEMV_IN_NORM); }

lp_status gemv_configure(void) {
  const GemvInput ins[] = {GEMV_IN_NORM, GEMV_IN_NORM, GEMV_IN_NORM, GEMV_IN_BF16, GEMV_IN_EMBED};
  const GemvOutput outs[] = {GEMV_OUT_BF16, GEMV_OUT_F32, GEMV_OUT_SILU_MUL, GEMV_OUT_ADD_F32, GEMV_OUT_BF16};
  for (int nt : kTokenCounts)
    for (int rows : {8, 16})
      for (int i = 0; i < 5; i++) {
        GemvKernel k = pick_kernel(ins[i], outs[i], nt, rows);
        if (k) CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmemBytes));
      }
  return LP_OK;
}

int gemv_grid(GemvOutput out, int n_out, int k, int num_sms) {
  const int tiles = tile_count(n_out, gemv_split(k).rows, out == GEMV_OUT_SILU_MUL);
  return tiles < num_sms * 4 ? tiles : num_sms * 4;  // more tiles: each CTA loops over them
}

lp_status launch_gemv(GemvInput in, GemvOutput out, const GemvArgs &a, int num_sms, cudaStream_t stream) {
  LP_REQUIRE(a.n_out > 0 && gemv_fits(a.tokens, a.k, in), "gemv: bad shape n_out=%d k=%d tokens=%d", a.n_out,
             a.k, a.tokens);
  LP_REQUIRE(in == GEMV_IN_BF16 || a.norm_w, "gemv: normalized input needs a norm weight");
  LP_REQUIRE(in != GEMV_IN_EMBED || (a.row_map && a.first.residual && a.first.cos_sin && a.first.half > 0),
             "gemv: embedding input needs token ids, a residual and a rope table");
  const int nt = padded_tokens(a.tokens);
  const GemvSplit split = gemv_split(a.k);
  GemvKernel kernel = pick_kernel(in, out, nt, split.rows);
  LP_REQUIRE(kernel, "gemv: unsupported input/output pair %d/%d", (int)in, (int)out);
  GemvArgs args = a;
  args.windows = split.windows;
  LP_REQUIRE(!a.row_stats || (out == GEMV_OUT_F32 && a.tokens <= LP_GEMV_MAX_TOKENS),
             "gemv: row stats need fp32 outputs of at most %d tokens", LP_GEMV_MAX_TOKENS);
  const int blocks = gemv_grid(out, a.n_out, a.k, num_sms);
  const size_t smem = in != GEMV_IN_BF16 ? norm_smem_bytes(split, nt) : 0;
  const size_t weight_bytes = (size_t)(out == GEMV_OUT_SILU_MUL ? 2 : 1) * a.n_out * a.k * 2;
  args.prefetch = weight_bytes <= kMaxPrefetchBytes;
  return launch_kernel(kernel, blocks, split.warps * 32, smem, stream, args);
}
