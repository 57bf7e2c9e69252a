/* SGLang's GPU-memory heuristics as kvpool-plan --gpu restates them (docs/services.md, "Sizing for a GPU"). */
#include "gpu_sizing.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* H100 and H200: measured (/work/shared anchors: nvidia-smi's memory.total and torch's total on the
 * machines the SGLang anchor figures were taken on). The others: nvidia-smi's figure for the card;
 * their CUDA total was not measured, so nvidia-smi's figure stands in for it (CUDA reports
 * 0.4-0.6 GiB less on the H100 and H200); --gpu-memory corrects it. */
static const gpu_spec kGpus[] = {
    {"H100", 81559, 79.2, "H100 80GB HBM3 (SXM), measured: nvidia-smi 81559 MiB, CUDA 79.2 GiB"},
    {"H200", 143771, 139.8, "H200 141GB HBM3e, measured: nvidia-smi 143771 MiB, CUDA 139.8 GiB"},
    {"A100-80G", 81920, 80.0, "A100 80GB (SXM4 and PCIe): nvidia-smi 81920 MiB; CUDA total not measured"},
    {"L40S", 46068, 46068.0 / 1024, "L40S 48GB: nvidia-smi 46068 MiB; CUDA total not measured"},
    {"RTX-4090", 24564, 24564.0 / 1024, "GeForce RTX 4090 24GB: nvidia-smi 24564 MiB; CUDA total not measured"},
};

/* Parameters from each checkpoint's name / model card; vision towers from the checkpoints' config.json
 * (vision_config.num_hidden_layers and hidden_size). Weight bits: the checkpoint's dtype. */
static const model_spec kModels[] = {
    {"meta-llama/Llama-3.1-8B-Instruct", 8.03, 16, 0, 0},
    {"deepseek-ai/DeepSeek-V3", 671, 8, 0, 0},
    {"deepseek-ai/DeepSeek-V3.2-Exp", 671, 8, 0, 0},
    {"google/gemma-3-27b-it", 27.4, 16, 27, 1152},
    {"openai/gpt-oss-120b", 116.8, 4.25, 0, 0},
    {"meta-llama/Llama-4-Scout-17B-16E", 109, 16, 34, 1408},
    {"Qwen/Qwen3-Next-80B-A3B-Instruct", 80, 16, 0, 0},
};

/* Lower-case letters and digits only, at most `len` - 1 of them. */
static void normalize(const char *in, char *out, size_t len) {
  size_t n = 0;
  for (; *in != '\0' && n + 1 < len; ++in) {
    if (isalnum((unsigned char)*in)) out[n++] = (char)tolower((unsigned char)*in);
  }
  out[n] = '\0';
}

const gpu_spec *gpu_find(const char *name) {
  char want[32], have[32];
  normalize(name, want, sizeof want);
  if (want[0] == '\0') return NULL;
  for (size_t i = 0; i < sizeof kGpus / sizeof kGpus[0]; ++i) {
    normalize(kGpus[i].name, have, sizeof have);
    if (strcmp(want, have) == 0) return &kGpus[i];
  }
  return NULL;
}

const gpu_spec *gpu_table(size_t *count) {
  *count = sizeof kGpus / sizeof kGpus[0];
  return kGpus;
}

const model_spec *model_find(const char *name) {
  for (size_t i = 0; i < sizeof kModels / sizeof kModels[0]; ++i) {
    if (strcmp(name, kModels[i].name) == 0) return &kModels[i];
  }
  return NULL;
}

/* Bigger GPUs get bigger prefill chunks and more captured batch sizes (they are also faster). */
long sglang_default_chunked_prefill(double gpu_mib) {
  if (gpu_mib < 35 * 1024) return 2048;
  if (gpu_mib < 60 * 1024) return 4096;
  if (gpu_mib < 160 * 1024) return 8192;
  return 16384;
}

long sglang_default_cuda_graph_max_bs(double gpu_mib, int tp_size) {
  if (gpu_mib < 20 * 1024) return 8;
  if (gpu_mib < 35 * 1024) return tp_size < 4 ? 24 : 80;
  if (gpu_mib < 60 * 1024) return tp_size < 4 ? 32 : 160;
  if (gpu_mib < 160 * 1024) return tp_size < 4 ? 256 : 512;
  return 512;
}

/* A ViT-L/14 (24 layers x 1024) costs 5% of the fraction; every doubling of layers x width^2 costs
 * 10% more of that, within [0.8, 1.05] x 0.95. */
double sglang_vlm_factor(int vision_layers, int vision_hidden) {
  if (vision_layers <= 0 || vision_hidden <= 0) return 1.0;
  const double ratio = (double)vision_layers * vision_hidden * vision_hidden / (24.0 * 1024.0 * 1024.0);
  double adjust = 1.0 - 0.1 * (ratio - 1.0);
  if (adjust < 0.8) adjust = 0.8;
  if (adjust > 1.05) adjust = 1.05;
  return 0.95 * adjust;
}

unsigned long sglang_default_running_requests(unsigned long long tokens, unsigned long context_len) {
  const double by_tokens = floor((double)tokens / (double)context_len * 512.0);
  if (by_tokens < 2048) return 2048;
  if (by_tokens > 4096) return 4096;
  return (unsigned long)by_tokens;
}

int sglang_reserve_compute(const sglang_inputs *in, sglang_reserve *out, char *err, size_t err_len) {
  sglang_reserve r = {0};
  r.chunked_prefill_size =
      in->chunked_prefill_size > 0 ? in->chunked_prefill_size : sglang_default_chunked_prefill(in->gpu_mib);
  r.cuda_graph_max_bs =
      in->cuda_graph_max_bs > 0 ? in->cuda_graph_max_bs : sglang_default_cuda_graph_max_bs(in->gpu_mib, in->tp_size);
  r.vlm_factor = 1.0;
  if (in->mem_fraction_static > 0) {
    r.fraction_given = 1;
    r.fraction_before_vlm = r.mem_fraction_static = in->mem_fraction_static;
  } else {
    r.constant_mib = 512;
    r.activations_mib = 1.5 * (double)(r.chunked_prefill_size > 2048 ? r.chunked_prefill_size : 2048);
    r.cuda_graph_mib = 2.0 * (double)r.cuda_graph_max_bs;
    r.parallel_mib = (double)in->tp_size * in->pp_size / 8.0 * 1024.0;
    const double sum = r.constant_mib + r.activations_mib + r.cuda_graph_mib + r.parallel_mib;
    r.floor_top_up_mib = (in->gpu_mib > 60 * 1024 && sum < 10 * 1024) ? 10 * 1024 - sum : 0;
    r.reserved_mib = sum + r.floor_top_up_mib;
    r.fraction_before_vlm = round((in->gpu_mib - r.reserved_mib) / in->gpu_mib * 1000.0) / 1000.0;
    r.vlm_factor = sglang_vlm_factor(in->vision_layers, in->vision_hidden);
    r.mem_fraction_static = r.fraction_before_vlm * r.vlm_factor;
    if (r.mem_fraction_static <= 0) {
      snprintf(err, err_len, "SGLang's reserve of %.0f MiB leaves nothing of the GPU's %.0f MiB", r.reserved_mib,
               in->gpu_mib);
      return -1;
    }
  }
  r.static_bytes = r.mem_fraction_static * in->cuda_total_bytes;
  r.kv_budget_bytes = floor(r.static_bytes - in->weights_per_rank_bytes);
  if (r.kv_budget_bytes <= 0) {
    snprintf(err, err_len,
             "the model does not fit: %.2f GiB of weights per rank against a static share of %.2f GiB "
             "(mem_fraction_static %.3f x %.2f GiB); raise --tp or use a larger GPU",
             in->weights_per_rank_bytes / GIB, r.static_bytes / GIB, r.mem_fraction_static,
             in->cuda_total_bytes / GIB);
    return -1;
  }
  *out = r;
  return 0;
}
