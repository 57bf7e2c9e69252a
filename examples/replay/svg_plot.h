/* The --sweep plot: hit ratio against capacity (log scale) as a self-contained SVG. */
#ifndef KVPOOL_REPLAY_SVG_PLOT_H
#define KVPOOL_REPLAY_SVG_PLOT_H

#include <stddef.h>

#include "report.h"

/* Plots the bounded runs as lines and the unbounded run (if any) as the dashed
 * ceilings. Returns nonzero (errno set) if path cannot be written. */
int svg_plot_sweep(const char *path, const run_summary *runs, size_t n);

#endif
