/* A progress bar on stderr, redrawn at most ten times a second. */
#ifndef KVPOOL_REPLAY_PROGRESS_H
#define KVPOOL_REPLAY_PROGRESS_H

#include <stddef.h>

typedef struct progress {
  int enabled;
  char label[64];
  double start;
  double last_draw;
  int drawn;
} progress;

/* mode: -1 = only when stderr is a terminal, 0 = never, 1 = always. */
void progress_init(progress *p, int mode, const char *label);
/* A replay_progress_fn: ctx is a progress*. */
void progress_update(void *ctx, size_t done, size_t total);
/* Erases the bar so that what follows starts on a clean line. */
void progress_end(progress *p);

#endif
