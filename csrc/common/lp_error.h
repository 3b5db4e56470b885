/* Per-thread error message store shared by both builds. */
#ifndef LP_ERROR_H
#define LP_ERROR_H
#include "../include/lmpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records "file:line: message" for lp_last_error() and returns code. */
lp_status lp_fail(lp_status code, const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#define LP_FAIL(code, ...) lp_fail((code), __FILE__, __LINE__, __VA_ARGS__)
/* Argument check: returns LP_ERR_INVALID naming the failed condition and a formatted detail. */
#define LP_REQUIRE(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond)) return LP_FAIL(LP_ERR_INVALID, __VA_ARGS__);                                      \
  } while (0)
/* Propagates a non-OK status from a nested call. */
#define LP_TRY(expr)                                                                               \
  do {                                                                                             \
    lp_status lp_try_status_ = (expr);                                                             \
    if (lp_try_status_ != LP_OK) return lp_try_status_;                                            \
  } while (0)

#endif
