/* How long each mutex of a process is held and waited for: a preloaded library that times
 * pthread_mutex_lock/trylock/unlock and the condition-variable waits that release a mutex, and
 * at exit prints the busiest mutexes as JSON lines on stderr. Issue 29 uses it to find how much
 * of a no-op task's life is spent holding the scheduler's mutex, which bounds how far the
 * workers can scale: at most 1 / (hold time per task) tasks/s, however many cores.
 *
 *   LD_PRELOAD=build-rel/bench/liblock_profile.so build-rel/bench/gpuflow_bench wide 100000 5
 *
 * Each line: {"mutex": N (rank by time held), "acquired": count, "held_s": total,
 * "waited_s": total time in pthread_mutex_lock, "contended": locks that found it taken}.
 * Timing reads the TSC (calibrated against CLOCK_MONOTONIC over the run); a lock or unlock
 * costs a few nanoseconds more while profiled. Only the first kHeldDepth mutexes a thread holds
 * at once are timed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

enum { kSlots = 4096, kHeldDepth = 8, kReport = 5 };

struct stats {
  _Atomic(uintptr_t) mutex;
  atomic_ullong acquired, held_ticks, waited_ticks, contended;
};
static struct stats table[kSlots];

struct held {
  pthread_mutex_t *mutex;
  uint64_t since;
};
static __thread struct held held[kHeldDepth];
static __thread int held_count;

static int (*real_lock)(pthread_mutex_t *);
static int (*real_trylock)(pthread_mutex_t *);
static int (*real_unlock)(pthread_mutex_t *);
static int (*real_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                                  const struct timespec *);
static uint64_t start_ticks;
static struct timespec start_time;

/* POSIX's way to store dlsym's answer in a function pointer (ISO C has no conversion). */
#define RESOLVE(pointer, name) (*(void **)(&(pointer)) = dlsym(RTLD_NEXT, name))

static void resolve(void) {
  RESOLVE(real_lock, "pthread_mutex_lock");
  RESOLVE(real_trylock, "pthread_mutex_trylock");
  RESOLVE(real_unlock, "pthread_mutex_unlock");
  RESOLVE(real_cond_wait, "pthread_cond_wait");
  RESOLVE(real_cond_timedwait, "pthread_cond_timedwait");
  RESOLVE(real_cond_clockwait, "pthread_cond_clockwait");
}

__attribute__((constructor)) static void init(void) {
  resolve();
  clock_gettime(CLOCK_MONOTONIC, &start_time);
  start_ticks = __rdtsc();
}

static struct stats *slot_of(pthread_mutex_t *m) {
  uintptr_t key = (uintptr_t)m;
  for (size_t i = (key >> 4) % kSlots, probes = 0; probes < kSlots;
       i = (i + 1) % kSlots, ++probes) {
    uintptr_t seen = atomic_load_explicit(&table[i].mutex, memory_order_acquire);
    if (seen == key) return &table[i];
    if (seen == 0) {
      uintptr_t expected = 0;
      if (atomic_compare_exchange_strong(&table[i].mutex, &expected, key) || expected == key)
        return &table[i];
    }
  }
  return NULL; /* the table is full: not counted */
}

static void acquired(pthread_mutex_t *m, uint64_t now, uint64_t waited, int contended) {
  struct stats *s = slot_of(m);
  if (s) {
    atomic_fetch_add_explicit(&s->acquired, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->waited_ticks, waited, memory_order_relaxed);
    if (contended) atomic_fetch_add_explicit(&s->contended, 1, memory_order_relaxed);
  }
  if (held_count < kHeldDepth) held[held_count] = (struct held){m, now};
  held_count++;
}

static void released(pthread_mutex_t *m) {
  const uint64_t now = __rdtsc();
  for (int i = (held_count < kHeldDepth ? held_count : kHeldDepth) - 1; i >= 0; --i) {
    if (held[i].mutex != m) continue;
    struct stats *s = slot_of(m);
    if (s) atomic_fetch_add_explicit(&s->held_ticks, now - held[i].since, memory_order_relaxed);
    for (int k = i; k + 1 < held_count && k + 1 < kHeldDepth; ++k) held[k] = held[k + 1];
    held_count--;
    return;
  }
  /* Not among the timed ones: one held past kHeldDepth, or one taken by a call this library
   * does not see (pthread_mutex_timedlock), which must not unbalance the count. */
  if (held_count > kHeldDepth) held_count--;
}

int pthread_mutex_lock(pthread_mutex_t *m) {
  if (!real_lock) resolve();
  const uint64_t before = __rdtsc();
  int contended = 0;
  int rc = real_trylock(m);
  if (rc != 0) {
    contended = 1;
    rc = real_lock(m);
  }
  const uint64_t now = __rdtsc();
  if (rc == 0) acquired(m, now, now - before, contended);
  return rc;
}

int pthread_mutex_trylock(pthread_mutex_t *m) {
  if (!real_trylock) resolve();
  const int rc = real_trylock(m);
  if (rc == 0) acquired(m, __rdtsc(), 0, 0);
  return rc;
}

int pthread_mutex_unlock(pthread_mutex_t *m) {
  if (!real_unlock) resolve();
  released(m);
  return real_unlock(m);
}

/* A condition wait releases the mutex while it sleeps: that time is not held. */
int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  released(m);
  const int rc = real_cond_wait(c, m);
  acquired(m, __rdtsc(), 0, 0);
  return rc;
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
  released(m);
  const int rc = real_cond_timedwait(c, m, t);
  acquired(m, __rdtsc(), 0, 0);
  return rc;
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                           const struct timespec *t) {
  released(m);
  const int rc = real_cond_clockwait(c, m, clock, t);
  acquired(m, __rdtsc(), 0, 0);
  return rc;
}

static int by_held(const void *a, const void *b) {
  const unsigned long long x = atomic_load(&((const struct stats *)a)->held_ticks);
  const unsigned long long y = atomic_load(&((const struct stats *)b)->held_ticks);
  return x < y ? 1 : x > y ? -1 : 0;
}

__attribute__((destructor)) static void report(void) {
  struct timespec end_time;
  clock_gettime(CLOCK_MONOTONIC, &end_time);
  const double seconds = (double)(end_time.tv_sec - start_time.tv_sec) +
                         (double)(end_time.tv_nsec - start_time.tv_nsec) / 1e9;
  const double ticks_per_s = seconds > 0 ? (double)(__rdtsc() - start_ticks) / seconds : 1e9;
  qsort(table, kSlots, sizeof table[0], by_held);
  for (int i = 0; i < kReport && atomic_load(&table[i].acquired) > 0; ++i) {
    fprintf(stderr,
            "{\"bench\": \"lock_profile\", \"mutex\": %d, \"acquired\": %llu, \"held_s\": %.6f, "
            "\"waited_s\": %.6f, \"contended\": %llu, \"process_s\": %.3f}\n",
            i, atomic_load(&table[i].acquired),
            (double)atomic_load(&table[i].held_ticks) / ticks_per_s,
            (double)atomic_load(&table[i].waited_ticks) / ticks_per_s,
            atomic_load(&table[i].contended), seconds);
  }
}
