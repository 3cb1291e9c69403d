/* The narrow benchmark's task body: spin on the clock, doing arithmetic between reads. */
#define _POSIX_C_SOURCE 200809L
#include "narrow_work.h"

#include <time.h>

int64_t narrow_work_ns;
struct narrow_record *narrow_records;

int64_t narrow_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void narrow_work(long task) {
  const int64_t start = narrow_now_ns();
  int64_t end;
  uint64_t x = (uint64_t)task;
  do {
    /* A few dozen multiply-adds between clock reads (about as long as one read), so that the
     * core computes rather than sits in the vDSO. */
    for (int i = 0; i < 32; i++)
      x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    end = narrow_now_ns();
  } while (end - start < narrow_work_ns);
  struct narrow_record *record = &narrow_records[task];
  record->start_ns = start;
  record->end_ns = end;
  record->scratch = x;
}
