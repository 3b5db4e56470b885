/* Device buffers of the CPU build: the "device" is host memory, so they are plain allocations. */
#include <stdlib.h>
#include <string.h>

#include "cpu_transfer.h"

lp_status cpu_buffer_check(const lp_dev_buffer *b) {
  LP_REQUIRE(b, "device buffer handle is NULL");
  LP_REQUIRE(b->magic == LP_CPU_BUFFER_MAGIC, "handle %p is not a live device buffer", (const void *)b);
  return LP_OK;
}

static lp_status check_range(const lp_dev_buffer *b, int64_t offset, int64_t bytes, const void *host) {
  LP_REQUIRE(offset >= 0 && bytes >= 0 && offset <= b->bytes && bytes <= b->bytes - offset,
             "range [%lld, %lld) outside the %lld-byte buffer", (long long)offset,
             (long long)(offset + bytes), (long long)b->bytes);
  LP_REQUIRE(host || bytes == 0, "host pointer is NULL");
  return LP_OK;
}

lp_status lp_dev_buffer_alloc(int32_t device, int64_t bytes, lp_dev_buffer **out_buf) {
  LP_REQUIRE(out_buf, "out_buf is NULL");
  LP_REQUIRE(device == 0, "device %d does not exist (the CPU backend has device 0 only)", device);
  LP_REQUIRE(bytes > 0, "bytes=%lld must be positive", (long long)bytes);
  lp_dev_buffer *b = calloc(1, sizeof *b);
  if (b) b->data = malloc((size_t)bytes);
  if (!b || !b->data) {
    free(b);
    return LP_FAIL(LP_ERR_OOM, "out of memory allocating a %lld-byte buffer", (long long)bytes);
  }
  b->magic = LP_CPU_BUFFER_MAGIC;
  b->bytes = bytes;
  *out_buf = b;
  return LP_OK;
}

lp_status lp_dev_buffer_free(lp_dev_buffer *b) {
  if (!b) return LP_OK;
  LP_TRY(cpu_buffer_check(b));
  b->magic = 0;
  free(b->data);
  free(b);
  return LP_OK;
}

lp_status lp_dev_buffer_bytes(lp_dev_buffer *b, int64_t *out_bytes) {
  LP_TRY(cpu_buffer_check(b));
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = b->bytes;
  return LP_OK;
}

lp_status lp_dev_buffer_write(lp_dev_buffer *b, int64_t offset, const void *src, int64_t bytes) {
  LP_TRY(cpu_buffer_check(b));
  LP_TRY(check_range(b, offset, bytes, src));
  if (bytes) memcpy(b->data + offset, src, (size_t)bytes);
  return LP_OK;
}

lp_status lp_dev_buffer_read(lp_dev_buffer *b, int64_t offset, void *dst, int64_t bytes) {
  LP_TRY(cpu_buffer_check(b));
  LP_TRY(check_range(b, offset, bytes, dst));
  if (bytes) memcpy(dst, b->data + offset, (size_t)bytes);
  return LP_OK;
}

lp_status lp_dev_buffer_copy(lp_dev_buffer *dst, lp_dev_buffer *src, int64_t bytes, lp_xfer_job **out_job) {
  LP_TRY(cpu_buffer_check(dst));
  LP_TRY(cpu_buffer_check(src));
  LP_REQUIRE(bytes >= 0 && bytes <= dst->bytes && bytes <= src->bytes,
             "bytes=%lld exceeds the source (%lld) or destination (%lld) buffer", (long long)bytes,
             (long long)src->bytes, (long long)dst->bytes);
  if (bytes) memmove(dst->data, src->data, (size_t)bytes);
  if (out_job) *out_job = NULL;
  return LP_OK;
}
