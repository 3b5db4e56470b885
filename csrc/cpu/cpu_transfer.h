/* Private structures of the CPU build's transfer path (device buffers are host memory). */
#ifndef LP_CPU_TRANSFER_H
#define LP_CPU_TRANSFER_H
#include "cpu_model.h"

#define LP_CPU_BUFFER_MAGIC 0x4c50434255460000ULL /* "LPCBUF" */

/* The lp_dev_buffer handle of lmpool.h. */
struct lp_dev_buffer {
  uint64_t magic;
  int64_t bytes;
  char *data;
};

/* LP_ERR_INVALID for NULL or a handle that is not a live buffer. */
lp_status cpu_buffer_check(const lp_dev_buffer *b);

#endif
