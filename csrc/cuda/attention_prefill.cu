// Causal variable-length prefill attention on tensor cores (FlashAttention-2 style). A CTA takes
// a 64-row query tile of one sequence and one query head; four warps own 16 rows each. Keys and
// values stream in 64-row tiles from the paged cache (this step's K/V were written there first,
// so cached prefixes and chunked prefill read the same way) through a two-stage cp.async
// pipeline. Shared-memory rows are XOR-swizzled in 16-byte chunks so ldmatrix is conflict-free.
#include "device_util.cuh"
#include "launch.cuh"
#include "mma_util.cuh"
#include "ops.cuh"

namespace {

const int kBQ = LP_PREFILL_TILE;  // query rows per CTA
const int kBK = 64;               // keys per tile
const int kThreads = 128;
const float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int smem_bytes() { return (kBQ + 4 * kBK) * D * 2; }

// Physical 16-byte chunk of (row, chunk) in a swizzled tile with D/8 chunks per row.
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * (D / 8) + (chunk ^ (row & 7));
}

template <int D>
__global__ __launch_bounds__(kThreads) void prefill_kernel(AttnArgs a, StepMeta m) {
  constexpr int CH = D / 8;
  extern __shared__ uint4 smem[];
  uint4 *sQ = smem, *sK = smem + kBQ * CH, *sV = sK + 2 * kBK * CH;  // K, V: two stages each
  pdl_trigger();
  pdl_wait();

  const int head = blockIdx.x, tile = blockIdx.y;
  const int seq = m.prefill_tiles[2 * tile], q0 = m.prefill_tiles[2 * tile + 1];
  const int qs = m.query_start[seq], ql = m.query_start[seq + 1] - qs, cl = m.context_lens[seq];
  const int kvh = head / (a.num_heads / a.num_kv_heads);
  const int rows = min(kBQ, ql - q0);
  const int ctx_lo = cl - ql + q0;             // context index of tile row 0
  const int n_keys = ctx_lo + rows;            // keys the last row sees
  const int n_tiles = (n_keys + kBK - 1) / kBK;
  const int *bt = m.block_tables + (size_t)seq * m.header[META_BT_STRIDE];
  const size_t slot_elems = (size_t)a.num_kv_heads * D;
  const int bs_mask = (1 << a.block_size_log2) - 1;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  for (int i = tid; i < kBQ * CH; i += kThreads) {
    const int r = i / CH, c = i % CH;
    const bf16 *src = a.qkv + (size_t)(qs + q0 + (r < rows ? r : 0)) * a.qkv_stride + (size_t)head * D + c * 8;
    cp_async_16(smem_addr(sQ + swz<D>(r, c)), src, r < rows ? 16 : 0);
  }
  auto load_kv = [&](int kt, int stage) {
    uint4 *dk = sK + stage * kBK * CH, *dv = sV + stage * kBK * CH;
    for (int i = tid; i < kBK * CH; i += kThreads) {
      const int r = i / CH, c = i % CH, j = kt * kBK + r;
      size_t off = 0;
      if (j < n_keys) {
        const size_t slot = ((size_t)bt[j >> a.block_size_log2] << a.block_size_log2) | (size_t)(j & bs_mask);
        off = slot * slot_elems + (size_t)kvh * D + c * 8;
      }
      cp_async_16(smem_addr(dk + swz<D>(r, c)), a.k_cache + off, j < n_keys ? 16 : 0);
      cp_async_16(smem_addr(dv + swz<D>(r, c)), a.v_cache + off, j < n_keys ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float row_max[2] = {-1e30f, -1e30f}, row_sum[2] = {0.f, 0.f};
  const int g = lane >> 2, quad = lane & 3, mat = lane >> 3, r8 = lane & 7;
  const int ctx_row[2] = {ctx_lo + warp * 16 + g, ctx_lo + warp * 16 + g + 8};
  const float sl2 = a.scale * kLog2e;

  for (int kt = 0; kt < n_tiles; kt++) {
    if (kt + 1 < n_tiles) {
      load_kv(kt + 1, (kt + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++)
        ldmatrix_x4(smem_addr(sQ + swz<D>(warp * 16 + (mat & 1) * 8 + r8, kk * 2 + (mat >> 1))), qf[kk][0],
                    qf[kk][1], qf[kk][2], qf[kk][3]);
    }
    const uint4 *tk = sK + (kt & 1) * kBK * CH, *tv = sV + (kt & 1) * kBK * CH;

    float s[kBK / 8][4];
#pragma unroll
    for (int i = 0; i < kBK / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
      for (int nt2 = 0; nt2 < kBK / 16; nt2++) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4(smem_addr(tk + swz<D>(nt2 * 16 + (mat >> 1) * 8 + r8, kk * 2 + (mat & 1))), b0, b1, b2, b3);
        mma_bf16_16816(s[2 * nt2], qf[kk], b0, b1);
        mma_bf16_16816(s[2 * nt2 + 1], qf[kk], b2, b3);
      }
    }

    // Scale into the log2 domain, mask the future, online softmax per row (rows g and g + 8).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kBK / 8; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = kt * kBK + nt * 8 + 2 * quad + (e & 1);
        const float v = key <= ctx_row[e >> 1] ? s[nt][e] * sl2 : -INFINITY;
        s[nt][e] = v;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], v);
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float mnew = fmaxf(row_max[r], tile_max[r]);
      alpha[r] = exp2f(row_max[r] - mnew);
      row_max[r] = mnew;
      row_sum[r] *= alpha[r];
    }
#pragma unroll
    for (int nt = 0; nt < kBK / 8; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        s[nt][e] = exp2f(s[nt][e] - row_max[e >> 1]);
        row_sum[e >> 1] += s[nt][e];
      }
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
      o[dt][0] *= alpha[0], o[dt][1] *= alpha[0];
      o[dt][2] *= alpha[1], o[dt][3] *= alpha[1];
    }

    // O += P V, P re-packed from the score accumulators as bf16 A fragments.
#pragma unroll
    for (int kk2 = 0; kk2 < kBK / 16; kk2++) {
      uint32_t pa[4] = {pack_bf16x2(s[2 * kk2][0], s[2 * kk2][1]), pack_bf16x2(s[2 * kk2][2], s[2 * kk2][3]),
                        pack_bf16x2(s[2 * kk2 + 1][0], s[2 * kk2 + 1][1]),
                        pack_bf16x2(s[2 * kk2 + 1][2], s[2 * kk2 + 1][3])};
#pragma unroll
      for (int dt2 = 0; dt2 < D / 16; dt2++) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(smem_addr(tv + swz<D>(kk2 * 16 + (mat & 1) * 8 + r8, dt2 * 2 + (mat >> 1))), b0, b1,
                          b2, b3);
        mma_bf16_16816(o[2 * dt2], pa, b0, b1);
        mma_bf16_16816(o[2 * dt2 + 1], pa, b2, b3);
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

#pragma unroll
  for (int r = 0; r < 2; r++) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int row = warp * 16 + g + r * 8;
    if (row >= rows) continue;
    const float inv = row_sum[r] > 0.f ? 1.f / row_sum[r] : 0.f;
    bf16 *dst = a.out + (size_t)(qs + q0 + row) * a.num_heads * D + (size_t)head * D + 2 * quad;
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++)
      *reinterpret_cast<uint32_t *>(dst + dt * 8) = pack_bf16x2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
}

}  // namespace

bool attention_prefill_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

lp_status attention_prefill_configure(void) {
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem_bytes<64>()));
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  smem_bytes<128>()));
  return LP_OK;
}

lp_status launch_attention_prefill(const AttnArgs &a, const StepMeta &m, int num_tiles, cudaStream_t stream) {
  LP_REQUIRE(num_tiles > 0 && attention_prefill_supported(a.head_dim) && a.num_heads % a.num_kv_heads == 0,
             "prefill attention: unsupported tiles=%d head_dim=%d heads=%d/%d", num_tiles, a.head_dim,
             a.num_heads, a.num_kv_heads);
  LP_REQUIRE(num_tiles <= 65535, "prefill attention: %d tiles exceed the grid limit", num_tiles);
  const dim3 grid(a.num_heads, num_tiles);
  if (a.head_dim == 64) return launch_kernel(prefill_kernel<64>, grid, kThreads, smem_bytes<64>(), stream, a, m);
  return launch_kernel(prefill_kernel<128>, grid, kThreads, smem_bytes<128>(), stream, a, m);
}
