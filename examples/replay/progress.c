/* The progress bar: "label [#####.....]  42.0%  1234/3993 requests  3.1 s". */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BAR_WIDTH 30
#define REDRAW_SECONDS 0.1

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(progress *p, int mode, const char *label) {
  memset(p, 0, sizeof *p);
  p->enabled = mode < 0 ? isatty(STDERR_FILENO) : mode;
  snprintf(p->label, sizeof p->label, "%s", label);
  p->start = p->last_draw = now_seconds();
}

void progress_update(void *ctx, size_t done, size_t total) {
  progress *p = ctx;
  if (!p->enabled) return;
  const double t = now_seconds();
  if (t - p->last_draw < REDRAW_SECONDS && done < total) return;
  p->last_draw = t;
  const double frac = total ? (double)done / (double)total : 1.0;
  char bar[BAR_WIDTH + 1];
  const int full = (int)(frac * BAR_WIDTH);
  for (int i = 0; i < BAR_WIDTH; ++i) bar[i] = i < full ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  /* \r and erase-to-end-of-line: redraw in place. */
  fprintf(stderr, "\r%s [%s] %5.1f%%  %zu/%zu requests  %.1f s\033[K", p->label, bar, 100.0 * frac, done, total,
          t - p->start);
  fflush(stderr);
  p->drawn = 1;
}

void progress_end(progress *p) {
  if (p->enabled && p->drawn) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  p->drawn = 0;
}
