/* Device queries of the CPU build: one "device", memory from the OS. */
#include <unistd.h>

#include "../common/lp_error.h"

int32_t lp_backend_kind(void) { return 0; }

lp_status lp_device_count(int32_t *out_count) {
  LP_REQUIRE(out_count, "out_count is NULL");
  *out_count = 1;
  return LP_OK;
}

lp_status lp_set_device(int32_t device) {
  LP_REQUIRE(device == 0, "device %d does not exist (the CPU backend has device 0 only)", device);
  return LP_OK;
}

lp_status lp_device_memory(int64_t *out_free_total) {
  LP_REQUIRE(out_free_total, "out_free_total is NULL");
  long page = sysconf(_SC_PAGESIZE);
  out_free_total[0] = (int64_t)sysconf(_SC_AVPHYS_PAGES) * page;
  out_free_total[1] = (int64_t)sysconf(_SC_PHYS_PAGES) * page;
  return LP_OK;
}

lp_status lp_device_synchronize(void) { return LP_OK; }
