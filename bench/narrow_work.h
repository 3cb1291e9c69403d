/* The compute-bound body every task of the narrow benchmark runs, whatever the peer, and the
 * record it leaves of when it ran: the harness derives from those records how long bodies
 * really took and how long each task waited between its inputs being done and its start. */
#ifndef GPUFLOW_NARROW_WORK_H
#define GPUFLOW_NARROW_WORK_H

#include <stdint.h>

/* One task's last run. A cache line each, so that two workers finishing neighbouring tasks at
 * the same moment do not share one. */
struct narrow_record {
  _Alignas(64) int64_t start_ns; /* CLOCK_MONOTONIC when the body began; 0: it has not run */
  int64_t end_ns;                /* when its work ended */
  uint64_t scratch;              /* the work loop's arithmetic, kept so it cannot be elided */
  int32_t worker;                /* which worker or thread ran it, set by the peer; -1: unknown */
};

/* How long each body keeps its core busy, and one record per task: set by the harness before a
 * run, read after it. */
extern int64_t narrow_work_ns;
extern struct narrow_record *narrow_records;

/* Keeps the calling core busy with arithmetic until narrow_work_ns have passed since the call
 * began (at least one round of it when that is 0), and records the start and end in
 * narrow_records[task]. */
void narrow_work(long task);

/* CLOCK_MONOTONIC in nanoseconds: the clock of the records, for the peers' timed regions. */
int64_t narrow_now_ns(void);

#endif
