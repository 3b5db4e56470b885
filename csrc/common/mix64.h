/* The splitmix64 finalizer both builds hash with (sampling noise, transfer validation patterns),
 * callable from host and device code. */
#ifndef LP_MIX64_H
#define LP_MIX64_H
#include <stdint.h>

#ifdef __CUDACC__
#define LP_HOST_DEVICE __host__ __device__
#else
#define LP_HOST_DEVICE
#endif

static inline LP_HOST_DEVICE uint64_t lp_mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Per-row key of lp_step's Gumbel noise (lmpool.h): token i's hash is lp_mix64(key ^ i). */
static inline LP_HOST_DEVICE uint64_t lp_sample_noise_key(uint64_t seed, int64_t position) {
  return lp_mix64(seed + 0x9E3779B97F4A7C15ULL * ((uint64_t)position + 1));
}

#endif
