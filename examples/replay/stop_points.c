/* The replay's self-stops (stop_points.h). */
#define _POSIX_C_SOURCE 200809L
#include "stop_points.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int stop_points_parse(const char *s, stop_points *out) {
  stop_points p = {.len = 0, .next = 0};
  const char *at = s;
  for (;;) {
    if (*at < '0' || *at > '9' || p.len == STOP_POINTS_MAX) return 0;
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(at, &end, 10);
    if (errno != 0 || v == 0 || (p.len > 0 && v <= p.at[p.len - 1])) return 0;
    p.at[p.len++] = (size_t)v;
    if (*end == '\0') break;
    if (*end != ',') return 0;
    at = end + 1;
  }
  *out = p;
  return 1;
}

void stop_points_check(stop_points *p, size_t done) {
  while (p->next < p->len && done >= p->at[p->next]) {
    ++p->next;
    /* Whoever waits for the stop (waitpid with WUNTRACED) reads what was printed so far. */
    fflush(stderr);
    fflush(stdout);
    raise(SIGSTOP);
  }
}

void stop_points_rewind(stop_points *p) { p->next = 0; }
