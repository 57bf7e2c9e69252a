/*
 * SVG line plot of a sweep, written by hand (no plotting library in C):
 * log-scale capacity axis with 1-2-5 ticks, percent axis with a grid, one line
 * per hit ratio, the unbounded ceilings dashed, a legend in the lower right
 * (hit ratios grow with capacity, so that corner stays empty).
 */
#include "svg_plot.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 860.0
#define H 520.0
#define PX0 80.0  /* plot area */
#define PX1 (W - 40.0)
#define PY0 82.0
#define PY1 (H - 70.0)

#define BLOCK_COLOR "#1f77b4"
#define TOKEN_COLOR "#e6550d"
#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"

typedef struct axes {
  double lo, hi;  /* log10 capacity */
  double ymax;    /* ratio at the top */
} axes;

static double px(const axes *a, double capacity) { return PX0 + (log10(capacity) - a->lo) / (a->hi - a->lo) * (PX1 - PX0); }
static double py(const axes *a, double ratio) { return PY1 - ratio / a->ymax * (PY1 - PY0); }

/* 1500000 -> "1.5M". */
static void si(double v, char *buf, size_t cap) {
  static const char *const kSuffix[] = {"", "k", "M", "G", "T"};
  int k = 0;
  while (v >= 1000.0 && k < 4) v /= 1000.0, ++k;
  snprintf(buf, cap, v == floor(v) ? "%.0f%s" : "%.1f%s", v, kSuffix[k]);
}

static void xml_text(FILE *f, const char *s) {
  for (; *s; ++s) {
    if (*s == '&') fputs("&amp;", f);
    else if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else fputc(*s, f);
  }
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static void x_axis(FILE *f, const axes *a) {
  /* 1-2-5 ticks when they fit, decades only for wide ranges. */
  static const double kSteps[] = {1, 2, 5};
  const int all = a->hi - a->lo <= 3.5;
  for (int e = (int)floor(a->lo); e <= (int)ceil(a->hi); ++e) {
    for (int s = 0; s < 3; ++s) {
      const double v = kSteps[s] * pow(10.0, e), lv = log10(v);
      if (lv < a->lo || lv > a->hi) continue;
      const double x = px(a, v);
      const int major = s == 0 || all;
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x, PY0, x, PY1,
              major ? "#e4e4e4" : "#f2f2f2");
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x, PY1, x, PY1 + 5);
      if (!major) continue;
      char label[16];
      si(v, label, sizeof label);
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">%s</text>\n", x, PY1 + 20,
              label);
    }
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">KV cache capacity (tokens, log scale)</text>\n",
          (PX0 + PX1) / 2, PY1 + 45);
}

static void y_axis(FILE *f, const axes *a) {
  for (int i = 0; i <= (int)lround(a->ymax * 10); ++i) {
    const double r = i / 10.0, y = py(a, r);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", PX0, y, PX1, y);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", PX0 - 5, y, PX0, y);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%d%%</text>\n", PX0 - 9, y + 4,
            i * 10);
  }
  fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">prefix hit ratio</text>\n",
          PX0 - 52, (PY0 + PY1) / 2);
}

/* One ratio as a line with markers and value labels (below for blocks, above for tokens). */
static void series(FILE *f, const axes *a, const run_summary *runs, size_t n, int tokens, const char *color) {
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" stroke-linejoin=\"round\" points=\"", color);
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded) continue;
    const double r = tokens ? runs[i].r.token_hit_ratio : runs[i].r.block_hit_ratio;
    fprintf(f, "%.1f,%.1f ", px(a, (double)runs[i].r.capacity_tokens), py(a, r));
  }
  fputs("\"/>\n", f);
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded) continue;
    const double r = tokens ? runs[i].r.token_hit_ratio : runs[i].r.block_hit_ratio;
    const double x = px(a, (double)runs[i].r.capacity_tokens), y = py(a, r);
    if (tokens) {
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"/>\n", x - 3.5, y - 3.5, color);
    } else {
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, color);
    }
    /* A block label that would sit on the x axis goes to the right of its marker. */
    const int right = !tokens && y + 17 > PY1 - 4;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"11\" fill=\"%s\">%.1f%%</text>\n",
            right ? x + 8 : x, tokens ? y - 9 : (right ? y + 12 : y + 17), right ? "start" : "middle", color, 100.0 * r);
  }
}

static void ceiling(FILE *f, const axes *a, double r, int tokens, const char *color) {
  const double y = py(a, r);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.6\" stroke-dasharray=\"7 5\"/>\n",
          PX0, y, PX1, y, color);
  /* Labelled on the left, where the curves are low and the line is free. */
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\">unbounded: %.1f%%</text>\n", PX0 + 6,
          tokens ? y - 5 : y + 14, color, 100.0 * r);
}

static void legend(FILE *f, int with_ceiling) {
  const double w = 235, h = with_ceiling ? 92 : 52, x = PX1 - w - 12, y = PY1 - h - 12;
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"white\" fill-opacity=\"0.92\" stroke=\"#bbb\" rx=\"4\"/>\n",
          x, y, w, h);
  const char *labels[] = {"block hit ratio", "token hit ratio", "unbounded ceiling (blocks)", "unbounded ceiling (tokens)"};
  for (int i = 0; i < (with_ceiling ? 4 : 2); ++i) {
    const double ly = y + 18 + i * 20.0;
    const char *color = i % 2 ? TOKEN_COLOR : BLOCK_COLOR;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", x + 12,
            ly, x + 44, ly, color, i >= 2 ? " stroke-dasharray=\"7 5\"" : "");
    if (i == 0) fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x + 28, ly, color);
    if (i == 1) fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"/>\n", x + 24.5, ly - 3.5, color);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", x + 54, ly + 4, labels[i]);
  }
}

static axes make_axes(const run_summary *runs, size_t n) {
  double cmin = INFINITY, cmax = 0, rmax = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = fmax(runs[i].r.block_hit_ratio, runs[i].r.token_hit_ratio);
    rmax = fmax(rmax, r);
    if (runs[i].unbounded) continue;
    cmin = fmin(cmin, (double)runs[i].r.capacity_tokens);
    cmax = fmax(cmax, (double)runs[i].r.capacity_tokens);
  }
  axes a;
  if (cmax == 0) cmin = cmax = 1e6;  /* only an unbounded run: any range */
  a.lo = log10(cmin) - 0.12;
  a.hi = log10(cmax) + 0.12;
  if (a.hi - a.lo < 1.0) {  /* at least one decade wide */
    const double mid = (a.hi + a.lo) / 2;
    a.lo = mid - 0.5;
    a.hi = mid + 0.5;
  }
  a.ymax = fmin(1.0, ceil((rmax + 0.06) * 10.0) / 10.0);
  return a;
}

int svg_plot_sweep(const char *path, const run_summary *runs, size_t n) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return 1;
  const axes a = make_axes(runs, n);
  const run_summary *ceil_run = NULL;
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded) ceil_run = &runs[i];
  }
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\" fill=\"#222\">\n",
          W, H, W, H, FONT);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%.1f\" y=\"32\" text-anchor=\"middle\" font-size=\"19\" font-weight=\"bold\">Prefix hit ratio vs. KV cache capacity</text>\n",
          W / 2);
  if (n > 0) {
    fprintf(f, "<text x=\"%.1f\" y=\"55\" text-anchor=\"middle\" font-size=\"13\" fill=\"#555\">", W / 2);
    xml_text(f, base_name(runs[0].trace_path));
    char reqs[32];
    fprintf(f, " \xc2\xb7 %s requests \xc2\xb7 page %" PRIu32 " \xc2\xb7 %s \xc2\xb7 concurrency %" PRIu32 "</text>\n",
            report_thousands(runs[0].r.requests, reqs, sizeof reqs), runs[0].r.page_size, runs[0].policy,
            runs[0].concurrency);
  }
  x_axis(f, &a);
  y_axis(f, &a);
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", PX0, PY0,
          PX1 - PX0, PY1 - PY0);
  if (ceil_run != NULL) {
    ceiling(f, &a, ceil_run->r.block_hit_ratio, 0, BLOCK_COLOR);
    ceiling(f, &a, ceil_run->r.token_hit_ratio, 1, TOKEN_COLOR);
  }
  series(f, &a, runs, n, 1, TOKEN_COLOR);
  series(f, &a, runs, n, 0, BLOCK_COLOR);
  legend(f, ceil_run != NULL);
  fputs("</svg>\n", f);
  return fclose(f) != 0;
}
