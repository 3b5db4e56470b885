/* Private structures of the CPU build's transfer path (device buffers are host memory). */
#ifndef LP_CPU_TRANSFER_H
#define LP_CPU_TRANSFER_H
#include "cpu_model.h"

#define LP_CPU_BUFFER_MAGIC 0x4c50434255460000ULL /* "LPCBUF" */

typedef struct cpu_buffer {
  uint64_t magic;
  int64_t bytes;
  char *data;
} cpu_buffer;

lp_status cpu_buffer_from_handle(uint64_t handle, cpu_buffer **out);

#endif
