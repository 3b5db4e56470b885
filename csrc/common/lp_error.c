#include "lp_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char lp_error_message[1024];

lp_status lp_fail(lp_status code, const char *file, int line, const char *fmt, ...) {
  const char *base = strrchr(file, '/');
  int n = snprintf(lp_error_message, sizeof lp_error_message, "%s:%d: ", base ? base + 1 : file, line);
  if (n < 0 || (size_t)n >= sizeof lp_error_message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lp_error_message + n, sizeof lp_error_message - (size_t)n, fmt, ap);
  va_end(ap);
  return code;
}

int32_t lp_last_error(char *buf, int32_t cap) {
  int32_t len = (int32_t)strlen(lp_error_message);
  if (buf && cap > 0) {
    int32_t k = len < cap - 1 ? len : cap - 1;
    memcpy(buf, lp_error_message, (size_t)k);
    buf[k] = '\0';
  }
  return len;
}

int32_t lp_abi_version(void) { return LP_ABI_VERSION; }
