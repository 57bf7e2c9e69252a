/*
 * SVG line plot of a sweep, written by hand (no plotting library in C):
 * log-scale capacity axis with 1-2-5 ticks, percent axis with a grid, one line
 * per hit ratio, the unbounded ceilings dashed, a legend in the lower right
 * (hit ratios grow with capacity, so that corner stays empty). Runs with a host
 * tier (--host-capacity-tokens) add a third line: their token hit ratio over both
 * tiers, at the device capacity, and a dotted mark at the host tier's size.
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
#define HOST_COLOR "#2ca02c"
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

/* Text boxes already drawn (value and ceiling labels, the legend): the host tier's value
 * labels, drawn last, go where they cross none of them. */
typedef struct box {
  double x0, y0, x1, y1;
} box;
static box g_boxes[256];
static size_t g_nboxes;

/* The box of 11px text at (x, y), anchored "start", "middle" or "end" (about 6.2px a character). */
static box text_box(double x, double y, const char *anchor, size_t chars) {
  const double w = 6.2 * (double)chars;
  const double x0 = strcmp(anchor, "start") == 0 ? x : strcmp(anchor, "end") == 0 ? x - w : x - w / 2;
  box b = {x0, y - 10, x0 + w, y + 2};
  return b;
}

static void place(box b) {
  if (g_nboxes < sizeof g_boxes / sizeof g_boxes[0]) g_boxes[g_nboxes++] = b;
}

static int is_free(box b) {
  if (b.x0 < PX0 || b.x1 > PX1 || b.y0 < PY0 || b.y1 > PY1) return 0;
  for (size_t i = 0; i < g_nboxes; ++i) {
    const box *o = &g_boxes[i];
    if (b.x0 < o->x1 && o->x0 < b.x1 && b.y0 < o->y1 && o->y0 < b.y1) return 0;
  }
  return 1;
}

/* One ratio as a line with markers and value labels (below for blocks, above for tokens),
 * over the runs without a host tier, or (host) over those with one (tokens only). */
static void series(FILE *f, const axes *a, const run_summary *runs, size_t n, int tokens, const char *color, int host) {
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" stroke-linejoin=\"round\" points=\"", color);
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded || runs[i].r.host_tier != host) continue;
    const double r = tokens ? runs[i].r.token_hit_ratio : runs[i].r.block_hit_ratio;
    fprintf(f, "%.1f,%.1f ", px(a, (double)runs[i].r.capacity_tokens), py(a, r));
  }
  fputs("\"/>\n", f);
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded || runs[i].r.host_tier != host) continue;
    const double r = tokens ? runs[i].r.token_hit_ratio : runs[i].r.block_hit_ratio;
    const double x = px(a, (double)runs[i].r.capacity_tokens), y = py(a, r);
    if (host) {
      fprintf(f, "<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" fill=\"%s\"/>\n", x, y - 5, color);
    } else if (tokens) {
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"/>\n", x - 3.5, y - 3.5, color);
    } else {
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, color);
    }
    char value[16];
    snprintf(value, sizeof value, "%.1f%%", 100.0 * r);
    double lx, ly;
    const char *anchor;
    if (host) {
      /* Above, below, to the right, or (no room) no label: the CSV has the values. */
      const double cand[3][2] = {{x, y - 9}, {x, y + 19}, {x + 8, y + 4}};
      const char *anchors[3] = {"middle", "middle", "start"};
      int k = 0;
      while (k < 3 && !is_free(text_box(cand[k][0], cand[k][1], anchors[k], strlen(value)))) ++k;
      if (k == 3) continue;
      lx = cand[k][0], ly = cand[k][1], anchor = anchors[k];
    } else {
      /* A block label that would sit on the x axis goes to the right of its marker. */
      const int right = !tokens && y + 17 > PY1 - 4;
      lx = right ? x + 8 : x;
      ly = tokens ? y - 9 : (right ? y + 12 : y + 17);
      anchor = right ? "start" : "middle";
    }
    place(text_box(lx, ly, anchor, strlen(value)));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"11\" fill=\"%s\">%s</text>\n", lx, ly,
            anchor, color, value);
  }
}

static void ceiling(FILE *f, const axes *a, double r, int tokens, const char *color) {
  const double y = py(a, r);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.6\" stroke-dasharray=\"7 5\"/>\n",
          PX0, y, PX1, y, color);
  /* Labelled on the left, where the curves are low and the line is free. */
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\">unbounded: %.1f%%</text>\n", PX0 + 6,
          tokens ? y - 5 : y + 14, color, 100.0 * r);
  place(text_box(PX0 + 6, tokens ? y - 5 : y + 14, "start", 17));
}

/* host_label: the legend line of the host-tier series, or NULL without one. */
static box legend_box(int with_ceiling, int host) {
  const double w = host ? 300 : 235, h = (with_ceiling ? 92 : 52) + (host ? 20 : 0);
  box b = {PX1 - w - 12, PY1 - h - 12, PX1 - 12, PY1 - 12};
  return b;
}

static void legend(FILE *f, int with_ceiling, const char *host_label) {
  const box b = legend_box(with_ceiling, host_label != NULL);
  const double x = b.x0, y = b.y0, w = b.x1 - b.x0, h = b.y1 - b.y0;
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"white\" fill-opacity=\"0.92\" stroke=\"#bbb\" rx=\"4\"/>\n",
          x, y, w, h);
  if (host_label != NULL) {
    const double ly = y + h - 14;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n", x + 12, ly,
            x + 44, ly, HOST_COLOR);
    fprintf(f, "<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" fill=\"%s\"/>\n", x + 28, ly - 5, HOST_COLOR);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">", x + 54, ly + 4);
    xml_text(f, host_label);
    fputs("</text>\n", f);
  }
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
  const run_summary *ceil_run = NULL, *host_run = NULL;
  for (size_t i = 0; i < n; ++i) {
    if (runs[i].unbounded) ceil_run = &runs[i];
    if (runs[i].r.host_tier && host_run == NULL) host_run = &runs[i];
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
    fprintf(f, " \xc2\xb7 %s requests \xc2\xb7 page %" PRIu32 " \xc2\xb7 %s \xc2\xb7 concurrency %" PRIu32,
            report_thousands(runs[0].r.requests, reqs, sizeof reqs), runs[0].r.page_size, runs[0].policy,
            runs[0].concurrency);
    if (host_run != NULL) {
      fputs(" \xc2\xb7 host tier ", f);
      xml_text(f, host_run->host_write_policy);
    }
    fputs("</text>\n", f);
  }
  x_axis(f, &a);
  y_axis(f, &a);
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", PX0, PY0,
          PX1 - PX0, PY1 - PY0);
  g_nboxes = 0;
  place(legend_box(ceil_run != NULL, host_run != NULL));
  if (ceil_run != NULL) {
    ceiling(f, &a, ceil_run->r.block_hit_ratio, 0, BLOCK_COLOR);
    ceiling(f, &a, ceil_run->r.token_hit_ratio, 1, TOKEN_COLOR);
  }
  const uint64_t host_tokens =
      host_run == NULL ? 0 : host_run->host_requested ? host_run->host_requested : host_run->r.host_capacity_tokens;
  if (host_run != NULL) {
    /* The host tier's size on the capacity axis: where a device-only cache is as large. */
    const double hx = px(&a, (double)host_tokens);
    if (hx >= PX0 && hx <= PX1) {
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.2\" stroke-dasharray=\"2 4\"/>\n",
              hx, PY0, hx, PY1, HOST_COLOR);
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" fill=\"%s\">host tier size</text>\n",
              hx - 4, PY0 + 14, HOST_COLOR);
      place(text_box(hx - 4, PY0 + 14, "end", 14));
    }
  }
  series(f, &a, runs, n, 1, TOKEN_COLOR, 0);
  series(f, &a, runs, n, 0, BLOCK_COLOR, 0);
  char host_label[96] = "";
  if (host_run != NULL) {
    char size[16];
    si((double)host_tokens, size, sizeof size);
    snprintf(host_label, sizeof host_label, "token hit ratio, + host tier of %s tokens", size);
    series(f, &a, runs, n, 1, HOST_COLOR, 1);
  }
  legend(f, ceil_run != NULL, host_run != NULL ? host_label : NULL);
  fputs("</svg>\n", f);
  return fclose(f) != 0;
}
