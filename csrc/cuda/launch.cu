// The PDL switch of launch.cuh.
#include <stdlib.h>
#include <string.h>

#include "launch.cuh"

bool pdl_enabled() {
  static const bool enabled = [] {
    const char *env = getenv("LMPOOL_CUDA_PDL");
    return !(env && strcmp(env, "0") == 0);
  }();
  return enabled;
}
