/* The floor a service round trip is measured against (issue 29): a bare request/answer over a
 * unix socket between two processes, 64 bytes each way, as ../shared/bench/unix_rtt.c does.
 * Fork the echoing process (unix_rtt_start) before any thread starts, so that the benchmark can
 * interleave bare round trips with its own and both see the same machine. */
#ifndef GPUFLOW_BENCH_UNIX_RTT_H
#define GPUFLOW_BENCH_UNIX_RTT_H

#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  int fd;
  pid_t echo;
} UnixRtt;

/* 0, or -1 with errno (the socket pair or the fork failed). */
static int unix_rtt_start(UnixRtt *r) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  r->echo = fork();
  if (r->echo < 0) return -1;
  if (r->echo == 0) { /* echoes 64-byte requests until the other end closes */
    char buf[64];
    close(sv[0]);
    while (read(sv[1], buf, sizeof buf) == (ssize_t)sizeof buf)
      if (write(sv[1], buf, sizeof buf) != (ssize_t)sizeof buf) _exit(1);
    _exit(0);
  }
  close(sv[1]);
  r->fd = sv[0];
  return 0;
}

/* One request and its answer; 0, or -1 when the echoing process is gone. */
static int unix_rtt_once(const UnixRtt *r) {
  char buf[64] = {0};
  if (write(r->fd, buf, sizeof buf) != (ssize_t)sizeof buf) return -1;
  return read(r->fd, buf, sizeof buf) == (ssize_t)sizeof buf ? 0 : -1;
}

static void unix_rtt_stop(UnixRtt *r) {
  close(r->fd);
  waitpid(r->echo, NULL, 0);
}

#endif
