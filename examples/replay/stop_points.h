/* --stop-at: the replay stops itself (SIGSTOP, the whole process) once given numbers
 * of requests have finished, so that a fault-injection test can change the world (kill
 * or stop a storage server) at a known point of the run and resume it with SIGCONT.
 * Redraws of the progress bar are too coarse for that: a fast replay finishes hundreds
 * of requests between two. */
#ifndef KVPOOL_REPLAY_STOP_POINTS_H
#define KVPOOL_REPLAY_STOP_POINTS_H

#include <stddef.h>

#define STOP_POINTS_MAX 8

typedef struct stop_points {
  size_t at[STOP_POINTS_MAX]; /* ascending request counts */
  size_t len;
  size_t next; /* the first not reached yet */
} stop_points;

/* Parses "N1,N2,..." (1 to STOP_POINTS_MAX positive counts, strictly ascending).
 * Returns 1 on success, 0 on a malformed list (*out is then unchanged). */
int stop_points_parse(const char *s, stop_points *out);
/* Called after every scheduler step with the requests finished so far: stops the
 * process once for every point reached (stderr and stdout flushed first). */
void stop_points_check(stop_points *p, size_t done);
/* Starts over from the first point (the next run of a --sweep). */
void stop_points_rewind(stop_points *p);

#endif
