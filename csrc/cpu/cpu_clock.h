/* Monotonic wall clock in milliseconds, for the step timer and the benchmark ceilings. */
#ifndef LP_CPU_CLOCK_H
#define LP_CPU_CLOCK_H
#include <time.h>

static inline double cpu_clock_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#endif
