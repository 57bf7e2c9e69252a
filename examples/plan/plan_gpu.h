/*
 * kvpool-plan --gpu: one configuration sized for one GPU, SGLang's choice
 * beside kvpool_plan()'s, as text or JSON (docs/services.md, "Sizing for a GPU").
 */
#ifndef KVPOOL_PLAN_PLAN_GPU_H
#define KVPOOL_PLAN_PLAN_GPU_H

#include <stddef.h>

/* The command line's GPU options (0 or NULL: not given). */
typedef struct gpu_options {
  const char *gpu_name;        /* --gpu: a name of the built-in table */
  double gpu_memory_gib;       /* --gpu-memory: GiB by hand (both what nvidia-smi and CUDA would say) */
  long tp_size;                /* --tp; else the config's parallel.tp_size */
  double weights_gib;          /* --weights-gib: all ranks together */
  double params_billion;       /* --params */
  double weight_bits;          /* --weight-bits (with --params; default 16) */
  int no_vision;               /* --no-vision */
  int vision_layers;           /* --vision LAYERS,HIDDEN */
  int vision_hidden;
  long chunked_prefill_size;   /* --chunked-prefill-size */
  long cuda_graph_max_bs;      /* --cuda-graph-max-bs */
  double mem_fraction_static;  /* --mem-fraction-static */
} gpu_options;

/*
 * Sizes the configuration `text` (read from `path`) and prints it to stdout
 * (JSON: one object, preceded by ",\n " unless `first`). Returns 0, or 1 after
 * a message on stderr (nothing printed to stdout).
 */
int plan_gpu_report(const char *path, const char *text, size_t len, const gpu_options *opt, int json, int first);

#endif /* KVPOOL_PLAN_PLAN_GPU_H */
