/*
 * kvpool-plan --gpu: the memory SGLang's server arguments set aside on one GPU
 * (activations, CUDA graphs, vision encoder) and the KV budget that is left
 * once the weights are loaded (docs/services.md, "Sizing for a GPU").
 * Pure arithmetic: no I/O, no kvpool calls.
 */
#ifndef KVPOOL_PLAN_GPU_SIZING_H
#define KVPOOL_PLAN_GPU_SIZING_H

#include <stddef.h>

/* A GPU of the built-in table. */
typedef struct gpu_spec {
  const char *name;         /* canonical name, as printed */
  double smi_mib;           /* memory.total as nvidia-smi reports it: what SGLang's server args read */
  double cuda_total_gib;    /* total memory CUDA reports (cudaMemGetInfo): what the model runner sizes from */
  const char *source;       /* where the two figures come from */
} gpu_spec;

/* The GPU called `name` (case, '-', '_' and spaces ignored: "rtx4090" = "RTX-4090"), or NULL. */
const gpu_spec *gpu_find(const char *name);
/* The table, for listing: *count receives its length. */
const gpu_spec *gpu_table(size_t *count);

/* Weights and vision encoder of a model the table knows, keyed on the config's model.name. */
typedef struct model_spec {
  const char *name;
  double params_billion;    /* parameters of the checkpoint, all ranks together */
  double bits_per_weight;   /* 16 for bf16, 8 for fp8, ~4.25 for MXFP4 */
  int vision_layers;        /* vision tower's num_hidden_layers; 0 for a text-only model */
  int vision_hidden;        /* vision tower's hidden_size */
} model_spec;

/* The model called exactly `name`, or NULL. */
const model_spec *model_find(const char *name);

/* What SGLang's server arguments are given (0 or a negative value: let SGLang choose). */
typedef struct sglang_inputs {
  double gpu_mib;           /* GPU memory as SGLang's server args see it (nvidia-smi MiB) */
  double cuda_total_bytes;  /* GPU memory as the model runner sees it */
  double weights_per_rank_bytes;
  int tp_size;
  int pp_size;
  long chunked_prefill_size;  /* --chunked-prefill-size, or 0 */
  long cuda_graph_max_bs;     /* --cuda-graph-max-bs, or 0 */
  double mem_fraction_static; /* --mem-fraction-static, or 0 */
  int vision_layers;          /* 0: not a vision-language model */
  int vision_hidden;
} sglang_inputs;

/* What SGLang derives from them. Memory in MiB as SGLang counts it (server args), bytes on the runner side. */
typedef struct sglang_reserve {
  long chunked_prefill_size;
  long cuda_graph_max_bs;
  int fraction_given;         /* 1 when mem_fraction_static was passed in (no reserve arithmetic) */
  double constant_mib;        /* attention-backend metadata */
  double activations_mib;     /* 1.5 x max(chunked_prefill_size, 2048) */
  double cuda_graph_mib;      /* 2 x cuda_graph_max_bs */
  double parallel_mib;        /* tp x pp / 8 x 1024 */
  double floor_top_up_mib;    /* what the 10 GiB minimum on GPUs over 60 GiB adds */
  double reserved_mib;        /* the sum: what mem_fraction_static leaves out */
  double fraction_before_vlm; /* round((gpu - reserved) / gpu, 3) */
  double vlm_factor;          /* 1 for a text-only model */
  double mem_fraction_static;
  double static_bytes;        /* mem_fraction_static x CUDA total: weights + KV pool */
  double kv_budget_bytes;     /* static_bytes - weights per rank: the KV pool's budget */
} sglang_reserve;

/* SGLang's defaults for a GPU of `gpu_mib` MiB (by memory class) and `tp_size` ranks. */
long sglang_default_chunked_prefill(double gpu_mib);
long sglang_default_cuda_graph_max_bs(double gpu_mib, int tp_size);

/* SGLang's vision-model factor on mem_fraction_static, from the ViT's depth and width. */
double sglang_vlm_factor(int vision_layers, int vision_hidden);

/* SGLang's default max_running_requests for a pool of `tokens` and a context of `context_len`. */
unsigned long sglang_default_running_requests(unsigned long long tokens, unsigned long context_len);

/*
 * Fills *out. Returns 0, or -1 with a message in err when the reserve leaves no
 * fraction of the GPU or the weights do not fit in the static share.
 */
int sglang_reserve_compute(const sglang_inputs *in, sglang_reserve *out, char *err, size_t err_len);

#endif /* KVPOOL_PLAN_GPU_SIZING_H */
