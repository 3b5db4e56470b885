/* Device buffers of the CPU build: the "device" is host memory, so they are plain allocations. */
#include <stdlib.h>
#include <string.h>

#include "cpu_transfer.h"

lp_status cpu_buffer_from_handle(uint64_t handle, cpu_buffer **out) {
  cpu_buffer *b = (cpu_buffer *)(uintptr_t)handle;
  LP_REQUIRE(b, "device buffer handle is 0");
  LP_REQUIRE(b->magic == LP_CPU_BUFFER_MAGIC, "handle 0x%llx is not a live device buffer",
             (unsigned long long)handle);
  *out = b;
  return LP_OK;
}

static lp_status check_range(const cpu_buffer *b, int64_t offset, int64_t bytes, const void *host) {
  LP_REQUIRE(offset >= 0 && bytes >= 0 && offset <= b->bytes && bytes <= b->bytes - offset,
             "range [%lld, %lld) outside the %lld-byte buffer", (long long)offset,
             (long long)(offset + bytes), (long long)b->bytes);
  LP_REQUIRE(host || bytes == 0, "host pointer is NULL");
  return LP_OK;
}

lp_status lp_dev_buffer_alloc(int32_t device, int64_t bytes, uint64_t *out_buf) {
  LP_REQUIRE(out_buf, "out_buf is NULL");
  LP_REQUIRE(device == 0, "device %d does not exist (the CPU backend has device 0 only)", device);
  LP_REQUIRE(bytes > 0, "bytes=%lld must be positive", (long long)bytes);
  cpu_buffer *b = calloc(1, sizeof *b);
  if (b) b->data = malloc((size_t)bytes);
  if (!b || !b->data) {
    free(b);
    return LP_FAIL(LP_ERR_OOM, "out of memory allocating a %lld-byte buffer", (long long)bytes);
  }
  b->magic = LP_CPU_BUFFER_MAGIC;
  b->bytes = bytes;
  *out_buf = (uint64_t)(uintptr_t)b;
  return LP_OK;
}

lp_status lp_dev_buffer_free(uint64_t handle) {
  if (handle == 0) return LP_OK;
  cpu_buffer *b;
  LP_TRY(cpu_buffer_from_handle(handle, &b));
  b->magic = 0;
  free(b->data);
  free(b);
  return LP_OK;
}

lp_status lp_dev_buffer_bytes(uint64_t handle, int64_t *out_bytes) {
  cpu_buffer *b;
  LP_TRY(cpu_buffer_from_handle(handle, &b));
  LP_REQUIRE(out_bytes, "out_bytes is NULL");
  *out_bytes = b->bytes;
  return LP_OK;
}

lp_status lp_dev_buffer_write(uint64_t handle, int64_t offset, const void *src, int64_t bytes) {
  cpu_buffer *b;
  LP_TRY(cpu_buffer_from_handle(handle, &b));
  LP_TRY(check_range(b, offset, bytes, src));
  if (bytes) memcpy(b->data + offset, src, (size_t)bytes);
  return LP_OK;
}

lp_status lp_dev_buffer_read(uint64_t handle, int64_t offset, void *dst, int64_t bytes) {
  cpu_buffer *b;
  LP_TRY(cpu_buffer_from_handle(handle, &b));
  LP_TRY(check_range(b, offset, bytes, dst));
  if (bytes) memcpy(dst, b->data + offset, (size_t)bytes);
  return LP_OK;
}

lp_status lp_dev_buffer_copy(uint64_t dst_handle, uint64_t src_handle, int64_t bytes, uint64_t *out_job) {
  cpu_buffer *dst, *src;
  LP_TRY(cpu_buffer_from_handle(dst_handle, &dst));
  LP_TRY(cpu_buffer_from_handle(src_handle, &src));
  LP_REQUIRE(bytes >= 0 && bytes <= dst->bytes && bytes <= src->bytes,
             "bytes=%lld exceeds the source (%lld) or destination (%lld) buffer", (long long)bytes,
             (long long)src->bytes, (long long)dst->bytes);
  if (bytes) memmove(dst->data, src->data, (size_t)bytes);
  if (out_job) *out_job = 0;
  return LP_OK;
}
