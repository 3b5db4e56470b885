// Fused matrix-vector products for decode batches of up to LP_GEMV_MAX_TOKENS tokens. At this size
// a linear layer only streams its weight once, so each kernel does its neighbours' work too and
// saves launches: the RMSNorm of the input rows (prologue), and the residual add or SiLU*mul
// (epilogue).
// Each warp computes two output rows for every token; 16-byte streaming loads of the weights.
#include "device_util.cuh"
#include "launch.cuh"
#include "ops.cuh"

namespace {

const int kThreads = 256;
const int kUnroll = 4;                 // 16-byte loads in flight per row per lane
const int kMaxSmemBytes = 96 * 1024;   // inputs staged in shared memory as bf16
const size_t kMaxPrefetchBytes = 32u << 20;  // weights prefetched into L2 (60 MB) ahead of use

// The two weight rows of one warp task: rows 2t, 2t+1, or gate row t and up row t + n_out.
template <int OUT>
__device__ __forceinline__ void task_rows(int task, int n_out, int *rows) {
  if (OUT == GEMV_OUT_SILU_MUL) {
    rows[0] = task, rows[1] = task + n_out;
  } else {
    rows[0] = 2 * task, rows[1] = 2 * task + 1 < n_out ? 2 * task + 1 : -1;
  }
}

// One warp's 16-byte weight loads for columns kb + u * step of its two rows (zeros past the end).
__device__ __forceinline__ void load_weights(const GemvArgs &a, const int *rows, int kb, int step,
                                             uint4 (&wv)[2][kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; u++) {
    const int kk = kb + u * step;
#pragma unroll
    for (int r = 0; r < 2; r++)
      wv[r][u] = (kk < a.k && rows[r] >= 0) ? ld_stream_16(a.w + (size_t)rows[r] * a.k + kk) : make_uint4(0, 0, 0, 0);
  }
}

// The prologue reads inputs the previous kernel has just written, under the weight traffic of the
// kernels launched behind it, so each dependent round trip to L2 is long (~0.6 us on an H200):
// every thread issues all its loads of a row at once (kStageVecs 16-byte pieces) before using any.
const int kStageVecs = 4;

// dst = bf16(row * rsqrt(mean(row^2) + eps) * norm_w), row fp32 [k] (k % 4 == 0).
__device__ __forceinline__ void stage_normed_row(const float *row, int k, const bf16 *norm_w, float eps, bf16 *dst,
                                                 float *scratch) {
  const float4 *src = reinterpret_cast<const float4 *>(row);
  const int n4 = k / 4, per_pass = (int)blockDim.x * kStageVecs;
  float4 v[kStageVecs];
  float ss = 0.f;
  for (int base = 0; base < n4; base += per_pass) {  // one pass for k <= 4 * kStageVecs * blockDim
#pragma unroll
    for (int u = 0; u < kStageVecs; u++) {
      const int i = base + u * (int)blockDim.x + (int)threadIdx.x;
      v[u] = i < n4 ? src[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kStageVecs; u++) ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / (float)k + eps);
  for (int base = 0; base < n4; base += per_pass) {
#pragma unroll
    for (int u = 0; u < kStageVecs; u++) {
      const int i = base + u * (int)blockDim.x + (int)threadIdx.x;
      if (i >= n4) break;
      const float4 x = n4 <= per_pass ? v[u] : src[i];  // longer rows are read again
      const float xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int e = 0; e < 4; e++) dst[4 * i + e] = __float2bfloat16(xv[e] * inv * __bfloat162float(norm_w[4 * i + e]));
    }
  }
}

// dst = row, bf16 [k] (k % 8 == 0).
__device__ __forceinline__ void stage_row(const bf16 *row, int k, bf16 *dst) {
  const uint4 *src = reinterpret_cast<const uint4 *>(row);
  const int n8 = k / 8;
  for (int base = 0; base < n8; base += (int)blockDim.x * kStageVecs) {
    uint4 v[kStageVecs];
#pragma unroll
    for (int u = 0; u < kStageVecs; u++) {
      const int i = base + u * (int)blockDim.x + (int)threadIdx.x;
      if (i < n8) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < kStageVecs; u++) {
      const int i = base + u * (int)blockDim.x + (int)threadIdx.x;
      if (i < n8) reinterpret_cast<uint4 *>(dst)[i] = v[u];
    }
  }
}

template <int NT, int IN, int OUT>
__global__ __launch_bounds__(kThreads) void gemv_kernel(GemvArgs a) {
  extern __shared__ uint4 smem_x[];
  __shared__ float scratch[33];
  __shared__ float partial[kThreads / 32][2][NT];  // per-warp sums when a task is split over warps
  bf16 *xs = reinterpret_cast<bf16 *>(smem_x);
  const int k = a.k;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // a.ksplit warps share one task, each taking every ksplit-th 256-column slice of k.
  const int ks = a.ksplit, slots = warps / ks, slot = warp / ks, sub = warp % ks;
  const int tasks = OUT == GEMV_OUT_SILU_MUL ? a.n_out : (a.n_out + 1) / 2;
  const int step = 256 * ks;  // columns between one warp's consecutive 16-byte loads
  const int kb0 = (sub * 32 + lane) * 8, first_base = blockIdx.x * slots;
  // Weights depend on nothing earlier kernels write: the first task's loads are issued before
  // waiting for the previous kernel (and before the prologue), later tasks' rows are streamed
  // into L2, so the weight latency overlaps the predecessor's tail and the input staging.
  pdl_trigger();
  int rows[2] = {-1, -1};
  if (first_base + slot < tasks) task_rows<OUT>(first_base + slot, a.n_out, rows);
  uint4 wv[2][kUnroll];
  load_weights(a, rows, kb0, step, wv);
  if (a.prefetch && sub == 0 && lane < 2) {
    for (int task = first_base + slot + gridDim.x * slots; task < tasks; task += gridDim.x * slots) {
      int later[2];
      task_rows<OUT>(task, a.n_out, later);
      const int row = lane == 0 ? later[0] : later[1];
      if (row >= 0) prefetch_l2(a.w + (size_t)row * k, (uint32_t)k * 2);
    }
  }
  // The norm weight is a constant too: staged behind the input rows before the wait (read after
  // the barrier in block_sum).
  bf16 *norm_s = xs + (size_t)NT * k;
  if (IN == GEMV_IN_NORM)
    for (int i = threadIdx.x; i < k / 8; i += blockDim.x)
      reinterpret_cast<uint4 *>(norm_s)[i] = reinterpret_cast<const uint4 *>(a.norm_w)[i];
  pdl_wait();
  // Residual add: the value this lane adds to in its first task is read now, alongside the input.
  float y_first = 0.f;
  if (OUT == GEMV_OUT_ADD_F32 && sub == 0 && lane < 2 * NT && lane % NT < a.tokens && rows[lane / NT] >= 0)
    y_first = static_cast<const float *>(a.y)[(size_t)(lane % NT) * a.ldy + rows[lane / NT]];
  // Prologue: stage (normalized) input rows in shared memory; rows past `tokens` are zero.
  for (int t = 0; t < NT; t++) {
    bf16 *dst = xs + (size_t)t * k;
    if (t >= a.tokens) {
      for (int i = threadIdx.x; i < k; i += blockDim.x) dst[i] = __float2bfloat16(0.f);
    } else if (IN == GEMV_IN_NORM) {
      stage_normed_row(static_cast<const float *>(a.x) + (size_t)(a.row_map ? a.row_map[t] : t) * k, k, norm_s, a.eps,
                       dst, scratch);
    } else {
      stage_row(static_cast<const bf16 *>(a.x) + (size_t)t * k, k, dst);
    }
  }
  __syncthreads();

  // Same trip count in every warp: the split reduction below has barriers.
  for (int base = first_base; base < tasks; base += gridDim.x * slots) {
    const int task = base + slot;
    if (base != first_base) {
      rows[0] = rows[1] = -1;
      if (task < tasks) task_rows<OUT>(task, a.n_out, rows);
    }
    float acc[2][NT];
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int t = 0; t < NT; t++) acc[r][t] = 0.f;
    for (int kb = kb0; kb < k; kb += step * kUnroll) {
      if (base != first_base || kb != kb0) load_weights(a, rows, kb, step, wv);
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int kk = kb + u * step;
        if (kk >= k) break;
        float w0[8], w1[8];
        bf16x8_to_f32(wv[0][u], w0);
        bf16x8_to_f32(wv[1][u], w1);
#pragma unroll
        for (int t = 0; t < NT; t++) {
          float xf[8];
          bf16x8_to_f32(*reinterpret_cast<const uint4 *>(xs + (size_t)t * k + kk), xf);
#pragma unroll
          for (int j = 0; j < 8; j++) {
            acc[0][t] = fmaf(w0[j], xf[j], acc[0][t]);
            acc[1][t] = fmaf(w1[j], xf[j], acc[1][t]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; r++)
#pragma unroll
      for (int t = 0; t < NT; t++) acc[r][t] = warp_sum(acc[r][t]);
    if (ks > 1) {  // fixed-order sum of the split's warps into the first one
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
          for (int t = 0; t < NT; t++) partial[warp][r][t] = acc[r][t];
      }
      __syncthreads();
      if (sub == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
          for (int t = 0; t < NT; t++) {
            float sum = 0.f;
            for (int s2 = 0; s2 < ks; s2++) sum += partial[warp + s2][r][t];
            acc[r][t] = sum;
          }
      }
      __syncthreads();
    }
    if (task >= tasks || sub != 0) continue;
    // Epilogue: lane t writes token t (lane NT + t the second row).
#pragma unroll
    for (int t = 0; t < NT; t++) {
      if (t >= a.tokens) break;
      if constexpr (OUT == GEMV_OUT_SILU_MUL) {
        if (lane == t) {
          const float g = round_bf16(acc[0][t]), u = round_bf16(acc[1][t]);
          static_cast<bf16 *>(a.y)[(size_t)t * a.ldy + task] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
        }
      } else {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          if (lane != r * NT + t || rows[r] < 0) continue;
          const size_t at = (size_t)t * a.ldy + rows[r];
          if (OUT == GEMV_OUT_BF16) static_cast<bf16 *>(a.y)[at] = __float2bfloat16(acc[r][t]);
          if (OUT == GEMV_OUT_F32) static_cast<float *>(a.y)[at] = acc[r][t];
          if (OUT == GEMV_OUT_ADD_F32)
            static_cast<float *>(a.y)[at] = (base == first_base ? y_first : static_cast<float *>(a.y)[at]) + acc[r][t];
        }
      }
    }
  }
}

typedef void (*GemvKernel)(GemvArgs);

// The (input, output) pairs the forward step uses.
template <int NT>
GemvKernel pick(GemvInput in, GemvOutput out) {
  if (in == GEMV_IN_NORM && out == GEMV_OUT_BF16) return gemv_kernel<NT, GEMV_IN_NORM, GEMV_OUT_BF16>;
  if (in == GEMV_IN_NORM && out == GEMV_OUT_F32) return gemv_kernel<NT, GEMV_IN_NORM, GEMV_OUT_F32>;
  if (in == GEMV_IN_NORM && out == GEMV_OUT_SILU_MUL) return gemv_kernel<NT, GEMV_IN_NORM, GEMV_OUT_SILU_MUL>;
  if (in == GEMV_IN_BF16 && out == GEMV_OUT_ADD_F32) return gemv_kernel<NT, GEMV_IN_BF16, GEMV_OUT_ADD_F32>;
  return nullptr;
}

static_assert(LP_GEMV_MAX_TOKENS <= 2, "kernels are instantiated for 1 and 2 tokens");
int padded_tokens(int tokens) { return tokens <= 1 ? 1 : 2; }

GemvKernel pick_kernel(GemvInput in, GemvOutput out, int nt) {
  return nt == 1 ? pick<1>(in, out) : pick<2>(in, out);
}

}  // namespace

bool gemv_fits(int tokens, int k) {
  return tokens >= 1 && tokens <= LP_GEMV_MAX_TOKENS && k % 8 == 0 &&
         (size_t)(padded_tokens(tokens) + 1) * k * 2 <= (size_t)kMaxSmemBytes;
}

lp_status gemv_configure(void) {
  const GemvInput ins[] = {GEMV_IN_NORM, GEMV_IN_NORM, GEMV_IN_NORM, GEMV_IN_BF16};
  const GemvOutput outs[] = {GEMV_OUT_BF16, GEMV_OUT_F32, GEMV_OUT_SILU_MUL, GEMV_OUT_ADD_F32};
  for (int nt = 1; nt <= 2; nt++)
    for (int i = 0; i < 4; i++)
      CUDA_CHECK(cudaFuncSetAttribute(pick_kernel(ins[i], outs[i], nt),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmemBytes));
  return LP_OK;
}

lp_status launch_gemv(GemvInput in, GemvOutput out, const GemvArgs &a, int num_sms, cudaStream_t stream) {
  LP_REQUIRE(a.n_out > 0 && gemv_fits(a.tokens, a.k), "gemv: bad shape n_out=%d k=%d tokens=%d", a.n_out, a.k,
             a.tokens);
  LP_REQUIRE(in != GEMV_IN_NORM || a.norm_w, "gemv: normalized input needs a norm weight");
  const int nt = padded_tokens(a.tokens);
  GemvKernel kernel = pick_kernel(in, out, nt);
  LP_REQUIRE(kernel, "gemv: unsupported input/output pair %d/%d", (int)in, (int)out);
  GemvArgs args = a;
  // Split long rows over warps so that each warp issues all its loads at once (k <= 1024 each).
  args.ksplit = 1;
  while (args.ksplit < 8 && args.ksplit * 1024 < a.k) args.ksplit *= 2;
  const int tasks = out == GEMV_OUT_SILU_MUL ? a.n_out : (a.n_out + 1) / 2;
  const int slots = kThreads / 32 / args.ksplit;
  int blocks = (tasks + slots - 1) / slots;
  if (blocks > num_sms * 4) blocks = num_sms * 4;
  const size_t weight_bytes = (size_t)(out == GEMV_OUT_SILU_MUL ? 2 : 1) * a.n_out * a.k * 2;
  args.prefetch = weight_bytes <= kMaxPrefetchBytes;
  const int smem_rows = nt + (in == GEMV_IN_NORM ? 1 : 0);  // input rows, then the norm weight
  return launch_kernel(kernel, blocks, kThreads, (size_t)smem_rows * a.k * 2, stream, args);
}
