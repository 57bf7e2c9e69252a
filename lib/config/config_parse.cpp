// JSON → Config, with strict validation. One function per section; each
// reads its keys through JsonReader (which rejects unknown keys) and then
// checks the rules that span several keys.
#include <cjson/cJSON.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

#include "config/config.hpp"
#include "config/json_reader.hpp"

namespace kvp::config {
namespace {

constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxDim = 1 << 20;
constexpr int64_t kMaxTokens = int64_t(1) << 40;

struct JsonDeleter {
  void operator()(cJSON* p) const { cJSON_Delete(p); }
};

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Which model keys each attention variant accepts (besides the common ones).
bool variant_uses(Attention a, const std::string& key) {
  const bool mha_like = a == Attention::kMHA || a == Attention::kSWA || a == Attention::kHybridLinear ||
                        a == Attention::kDoubleSparse;
  if (key == "kv_heads" || key == "head_dim") return mha_like;
  if (key == "kv_lora_rank" || key == "qk_rope_head_dim") return a == Attention::kMLA || a == Attention::kNSA;
  if (key == "index_head_dim") return a == Attention::kNSA;
  if (key == "sliding_window" || key == "swa_layers" || key == "swa_layer_pattern") return a == Attention::kSWA;
  if (key == "full_attention_layers" || key == "mamba") return a == Attention::kHybridLinear;
  if (key == "heavy_channels") return a == Attention::kDoubleSparse;
  return false;
}

Attention parse_attention(const std::string& s) {
  if (s == "mla") return Attention::kMLA;
  if (s == "nsa") return Attention::kNSA;
  if (s == "swa") return Attention::kSWA;
  if (s == "hybrid_linear") return Attention::kHybridLinear;
  if (s == "double_sparse") return Attention::kDoubleSparse;
  return Attention::kMHA;
}

Status read_dtype(JsonReader& r, const char* key, std::initializer_list<const char*> allowed, DType* out) {
  std::optional<std::string> name;
  KVPOOL_RETURN_IF_ERROR(r.get_choice(key, allowed, false, &name));
  if (name) *out = *parse_dtype(*name);
  return Status::ok();
}

Status parse_shape(JsonReader& r, const char* key, std::vector<int64_t>* out) {
  std::optional<std::vector<int64_t>> shape;
  KVPOOL_RETURN_IF_ERROR(r.get_int_array(key, 1, kMaxDim, false, true, &shape));
  if (shape->empty() || shape->size() > 4) {
    return r.error_at(key, std::to_string(shape->size()) + " dimensions", "1 to 4 dimensions");
  }
  *out = *shape;
  return Status::ok();
}

Status parse_mamba(const cJSON* obj, const std::string& path, MambaConfig* m) {
  JsonReader r(obj, path);
  KVPOOL_RETURN_IF_ERROR(parse_shape(r, "conv_shape", &m->conv_shape));
  KVPOOL_RETURN_IF_ERROR(parse_shape(r, "ssm_shape", &m->ssm_shape));
  KVPOOL_RETURN_IF_ERROR(read_dtype(r, "conv_dtype", {"f32", "f16", "bf16"}, &m->conv_dtype));
  KVPOOL_RETURN_IF_ERROR(read_dtype(r, "ssm_dtype", {"f32", "f16", "bf16"}, &m->ssm_dtype));
  return r.finish();
}

// Layer lists for swa / hybrid_linear become a per-layer "keeps full KV" flag.
Status parse_layer_kinds(JsonReader& r, ModelConfig* m) {
  m->layer_is_full.assign(m->num_layers, true);
  if (m->attention == Attention::kSWA) {
    const bool by_list = r.has("swa_layers");
    const bool by_pattern = r.has("swa_layer_pattern");
    if (by_list == by_pattern) {
      return Status::config(r.path() + ": got " + (by_list ? "both" : "neither") +
                            " of swa_layers and swa_layer_pattern, expected exactly one");
    }
    if (by_list) {
      std::optional<std::vector<int64_t>> layers;
      KVPOOL_RETURN_IF_ERROR(r.get_int_array("swa_layers", 0, m->num_layers - 1, true, true, &layers));
      for (int64_t l : *layers) m->layer_is_full[l] = false;
    } else {
      std::optional<std::string> pattern;
      KVPOOL_RETURN_IF_ERROR(r.get_string("swa_layer_pattern", true, &pattern));
      if (pattern->empty() || pattern->find_first_not_of("SF") != std::string::npos) {
        return r.error_at("swa_layer_pattern", "\"" + *pattern + "\"",
                          "a non-empty string of 'S' (sliding) and 'F' (full), repeated over the layers");
      }
      for (int l = 0; l < m->num_layers; ++l) m->layer_is_full[l] = (*pattern)[l % pattern->size()] == 'F';
    }
    int swa = 0;
    for (bool full : m->layer_is_full) swa += full ? 0 : 1;
    if (swa == 0 || swa == m->num_layers) {
      return Status::config(r.path() + ": got " + std::to_string(swa) + " sliding-window layers of " +
                            std::to_string(m->num_layers) +
                            ", expected at least one sliding-window and one full-attention layer");
    }
  }
  if (m->attention == Attention::kHybridLinear) {
    std::optional<std::vector<int64_t>> layers;
    KVPOOL_RETURN_IF_ERROR(r.get_int_array("full_attention_layers", 0, m->num_layers - 1, true, true, &layers));
    if (layers->empty()) return r.error_at("full_attention_layers", "an empty array", "at least one layer id");
    m->layer_is_full.assign(m->num_layers, false);
    for (int64_t l : *layers) m->layer_is_full[l] = true;
  }
  return Status::ok();
}

Status parse_model(const cJSON* obj, ModelConfig* m) {
  JsonReader r(obj, "$.model");
  std::optional<std::string> name, attention;
  std::optional<int64_t> layers;
  KVPOOL_RETURN_IF_ERROR(r.get_string("name", false, &name));
  KVPOOL_RETURN_IF_ERROR(r.get_int("num_layers", 1, kMaxLayers, true, &layers));
  KVPOOL_RETURN_IF_ERROR(
      r.get_choice("attention", {"mha", "mla", "nsa", "swa", "hybrid_linear", "double_sparse"}, false, &attention));
  m->name = name.value_or("");
  m->num_layers = static_cast<int>(*layers);
  m->attention = parse_attention(attention.value_or("mha"));

  for (const char* key : {"kv_heads", "head_dim", "kv_lora_rank", "qk_rope_head_dim", "index_head_dim",
                          "sliding_window", "swa_layers", "swa_layer_pattern", "full_attention_layers", "mamba",
                          "heavy_channels"}) {
    if (r.has(key) && !variant_uses(m->attention, key)) {
      return Status::config(r.path_of(key) + ": not used by attention \"" + attention_name(m->attention) +
                            "\", expected it only with a variant that needs it (see docs/config.md)");
    }
  }

  std::optional<int64_t> v;
  auto read_dim = [&](const char* key, int* out, bool required) -> Status {
    v.reset();
    KVPOOL_RETURN_IF_ERROR(r.get_int(key, 1, kMaxDim, required, &v));
    if (v) *out = static_cast<int>(*v);
    return Status::ok();
  };
  const Attention a = m->attention;
  if (variant_uses(a, "kv_heads")) {
    KVPOOL_RETURN_IF_ERROR(read_dim("kv_heads", &m->kv_heads, true));
    KVPOOL_RETURN_IF_ERROR(read_dim("head_dim", &m->head_dim, true));
  }
  if (a == Attention::kMLA || a == Attention::kNSA) {
    KVPOOL_RETURN_IF_ERROR(read_dim("kv_lora_rank", &m->kv_lora_rank, true));
    KVPOOL_RETURN_IF_ERROR(read_dim("qk_rope_head_dim", &m->qk_rope_head_dim, true));
  }
  if (a == Attention::kNSA) {
    m->index_head_dim = 128;
    KVPOOL_RETURN_IF_ERROR(read_dim("index_head_dim", &m->index_head_dim, false));
    if (m->index_head_dim != 128) {
      return r.error_at("index_head_dim", std::to_string(m->index_head_dim), "128 (the NSA indexer key width)");
    }
    if (m->kv_lora_rank % 128 != 0) {
      return r.error_at("kv_lora_rank", std::to_string(m->kv_lora_rank), "a multiple of 128 for nsa");
    }
  }
  if (a == Attention::kSWA) {
    v.reset();
    KVPOOL_RETURN_IF_ERROR(r.get_int("sliding_window", 1, int64_t(1) << 30, true, &v));
    m->sliding_window = static_cast<int>(*v);
  }
  if (a == Attention::kDoubleSparse) {
    KVPOOL_RETURN_IF_ERROR(read_dim("heavy_channels", &m->heavy_channels, true));
    if (m->heavy_channels > m->head_dim) {
      return r.error_at("heavy_channels", std::to_string(m->heavy_channels),
                        "at most head_dim (" + std::to_string(m->head_dim) + ")");
    }
  }
  KVPOOL_RETURN_IF_ERROR(parse_layer_kinds(r, m));
  if (a == Attention::kHybridLinear) {
    const cJSON* mamba = nullptr;
    KVPOOL_RETURN_IF_ERROR(r.get_object("mamba", true, &mamba));
    KVPOOL_RETURN_IF_ERROR(parse_mamba(mamba, r.path_of("mamba"), &m->mamba));
  }
  return r.finish();
}

Status parse_device(JsonReader& r, PoolConfig* p) {
  std::optional<std::string> device;
  KVPOOL_RETURN_IF_ERROR(r.get_string("device", false, &device));
  if (!device || *device == "cpu") return Status::ok();
  const std::string& d = *device;
  if (d == "cuda") {
    p->device = DeviceKind::kCuda;
    return Status::ok();
  }
  if (d.rfind("cuda:", 0) == 0 && d.size() > 5 && d.size() <= 8 &&
      d.find_first_not_of("0123456789", 5) == std::string::npos) {
    p->device = DeviceKind::kCuda;
    p->device_index = std::stoi(d.substr(5));
    return Status::ok();
  }
  return r.error_at("device", "\"" + d + "\"", "\"cpu\", \"cuda\" or \"cuda:N\"");
}

Status parse_pool(const cJSON* obj, const ModelConfig& m, PoolConfig* p) {
  JsonReader r(obj, "$.pool");
  KVPOOL_RETURN_IF_ERROR(parse_device(r, p));
  KVPOOL_RETURN_IF_ERROR(
      read_dtype(r, "kv_dtype", {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"}, &p->kv_dtype));
  std::optional<int64_t> page, ctx;
  KVPOOL_RETURN_IF_ERROR(r.get_int("page_size", 1, 4096, false, &page));
  if (page && !is_power_of_two(*page)) {
    return r.error_at("page_size", std::to_string(*page), "a power of two in [1, 4096]");
  }
  p->page_size = static_cast<int>(page.value_or(1));
  KVPOOL_RETURN_IF_ERROR(r.get_int("max_total_tokens", 1, kMaxTokens, false, &p->max_total_tokens));
  KVPOOL_RETURN_IF_ERROR(r.get_int("memory_bytes", 1, int64_t(1) << 52, false, &p->memory_bytes));
  KVPOOL_RETURN_IF_ERROR(r.get_number("mem_fraction", 0.0, 1.0, true, false, &p->mem_fraction));
  KVPOOL_RETURN_IF_ERROR(r.get_int("max_running_requests", 1, 1 << 20, false, &p->max_running_requests));
  KVPOOL_RETURN_IF_ERROR(r.get_int("max_context_len", 1, 1 << 26, true, &ctx));
  p->max_context_len = *ctx;

  if (p->memory_bytes && p->mem_fraction) {
    return Status::config("$.pool: got both memory_bytes and mem_fraction, expected at most one memory budget");
  }
  if (!p->max_total_tokens && !p->memory_bytes && !p->mem_fraction) {
    return Status::config(
        "$.pool: got no capacity, expected max_total_tokens, memory_bytes or mem_fraction");
  }
  if (p->max_total_tokens && *p->max_total_tokens < p->page_size) {
    return r.error_at("max_total_tokens", std::to_string(*p->max_total_tokens),
                      "at least one page (" + std::to_string(p->page_size) + " tokens)");
  }

  std::optional<std::string> mode;
  KVPOOL_RETURN_IF_ERROR(r.get_choice("disaggregation_mode", {"none", "prefill", "decode"}, false, &mode));
  if (mode == std::string("prefill")) p->disaggregation_mode = DisaggregationMode::kPrefill;
  if (mode == std::string("decode")) p->disaggregation_mode = DisaggregationMode::kDecode;

  const bool swa = m.attention == Attention::kSWA;
  const bool hybrid = m.attention == Attention::kHybridLinear;
  std::optional<std::string> free_list;
  KVPOOL_RETURN_IF_ERROR(r.get_choice("free_list", {"host", "device"}, false, &free_list));
  if (free_list == std::string("device")) {
    if (p->device != DeviceKind::kCuda) {
      return r.error_at("free_list", "\"device\"", "\"host\" (a device free list needs pool.device \"cuda\")");
    }
    if (swa) return r.error_at("free_list", "\"device\"", "\"host\" (the swa allocator keeps its lists on the host)");
    p->device_free_list = true;
  }
  for (const char* key : {"swa_full_tokens_ratio"}) {
    if (r.has(key) && !swa) return Status::config(r.path_of(key) + ": only used with attention \"swa\"");
  }
  for (const char* key : {"mamba_cache_size", "mamba_full_memory_ratio", "mamba_extra_buffer", "mamba_spec_draft_tokens"}) {
    if (r.has(key) && !hybrid) return Status::config(r.path_of(key) + ": only used with attention \"hybrid_linear\"");
  }
  std::optional<double> ratio;
  KVPOOL_RETURN_IF_ERROR(r.get_number("swa_full_tokens_ratio", 0.0, 1.0, true, false, &ratio));
  p->swa_full_tokens_ratio = ratio.value_or(0.8);
  KVPOOL_RETURN_IF_ERROR(r.get_int("mamba_cache_size", 1, 1 << 24, false, &p->mamba_cache_size));
  ratio.reset();
  KVPOOL_RETURN_IF_ERROR(r.get_number("mamba_full_memory_ratio", 0.0, 100.0, true, false, &ratio));
  p->mamba_full_memory_ratio = ratio.value_or(0.9);
  std::optional<bool> extra;
  KVPOOL_RETURN_IF_ERROR(r.get_bool("mamba_extra_buffer", false, &extra));
  p->mamba_extra_buffer = extra.value_or(false);
  std::optional<int64_t> draft;
  KVPOOL_RETURN_IF_ERROR(r.get_int("mamba_spec_draft_tokens", 0, 64, false, &draft));
  p->mamba_spec_draft_tokens = draft.value_or(0);
  std::optional<bool> thread_safe;
  KVPOOL_RETURN_IF_ERROR(r.get_bool("thread_safe", false, &thread_safe));
  p->thread_safe = thread_safe.value_or(false);
  return r.finish();
}

Status parse_parallel(const cJSON* obj, int num_layers, ParallelConfig* par) {
  par->end_layer = num_layers - 1;
  if (obj == nullptr) return Status::ok();
  JsonReader r(obj, "$.parallel");
  std::optional<int64_t> tp_size, tp_rank, start, end;
  KVPOOL_RETURN_IF_ERROR(r.get_int("tp_size", 1, 4096, false, &tp_size));
  par->tp_size = static_cast<int>(tp_size.value_or(1));
  KVPOOL_RETURN_IF_ERROR(r.get_int("tp_rank", 0, par->tp_size - 1, false, &tp_rank));
  par->tp_rank = static_cast<int>(tp_rank.value_or(0));
  KVPOOL_RETURN_IF_ERROR(r.get_int("start_layer", 0, num_layers - 1, false, &start));
  par->start_layer = static_cast<int>(start.value_or(0));
  KVPOOL_RETURN_IF_ERROR(r.get_int("end_layer", par->start_layer, num_layers - 1, false, &end));
  par->end_layer = static_cast<int>(end.value_or(num_layers - 1));
  return r.finish();
}

Status parse_prefix_cache(const cJSON* obj, PrefixCacheConfig* pc) {
  if (obj == nullptr) return Status::ok();
  JsonReader r(obj, "$.prefix_cache");
  std::optional<std::string> kind, eviction, evict_rule;
  std::optional<bool> events;
  KVPOOL_RETURN_IF_ERROR(r.get_choice("kind", {"radix", "chunk", "none"}, false, &kind));
  if (kind == std::string("chunk")) pc->kind = PrefixCacheKind::kChunk;
  if (kind == std::string("none")) pc->kind = PrefixCacheKind::kNone;
  KVPOOL_RETURN_IF_ERROR(r.get_choice("eviction", {"lru", "lfu", "fifo", "mru", "filo", "priority"}, false, &eviction));
  pc->eviction = eviction.value_or("lru");
  KVPOOL_RETURN_IF_ERROR(r.get_bool("events", false, &events));
  pc->events = events.value_or(false);
  KVPOOL_RETURN_IF_ERROR(r.get_choice("evict_rule", {"shortfall", "sglang"}, false, &evict_rule));
  pc->sglang_evict_rule = evict_rule == std::string("sglang");
  if (pc->kind != PrefixCacheKind::kRadix && (eviction || pc->events || evict_rule)) {
    return Status::config("$.prefix_cache: eviction, events and evict_rule need kind \"radix\", got kind \"" +
                          kind.value_or("radix") + "\"");
  }
  return r.finish();
}

Status parse_host_cache(const cJSON* obj, HostCacheConfig* hc) {
  if (obj == nullptr) return Status::ok();
  hc->enabled = true;
  JsonReader r(obj, "$.host_cache");
  std::optional<double> ratio;
  std::optional<int64_t> size, headroom;
  std::optional<std::string> layout, policy, io;
  KVPOOL_RETURN_IF_ERROR(r.get_number("ratio", 1.0, 1000.0, true, false, &ratio));
  hc->ratio = ratio.value_or(2.0);
  KVPOOL_RETURN_IF_ERROR(r.get_int("size_bytes", 0, int64_t(1) << 52, false, &size));
  hc->size_bytes = size.value_or(0);
  KVPOOL_RETURN_IF_ERROR(r.get_int("headroom_bytes", 0, int64_t(1) << 52, false, &headroom));
  hc->headroom_bytes = headroom.value_or(int64_t(10) << 30);
  KVPOOL_RETURN_IF_ERROR(r.get_choice(
      "layout", {"layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head"}, false, &layout));
  hc->layout = layout.value_or("layer_first");
  // Listed among the choices above so that the message can say why it is refused.
  if (hc->layout == "page_first_kv_split") {
    return Status::config("$.host_cache.layout: got \"page_first_kv_split\", expected \"layer_first\", \"page_first\", "
                          "\"page_first_direct\" or \"page_head\" (page_first_kv_split is SGLang's layout for "
                          "Ascend NPUs, which kvpool does not support)");
  }
  KVPOOL_RETURN_IF_ERROR(
      r.get_choice("write_policy", {"write_back", "write_through", "write_through_selective"}, false, &policy));
  hc->write_policy = policy.value_or("write_through");
  KVPOOL_RETURN_IF_ERROR(r.get_choice("io_backend", {"kernel", "direct"}, false, &io));
  hc->io_backend = io.value_or("kernel");
  if (hc->layout == "page_first_direct" && hc->io_backend != "direct") {
    return Status::config("$.host_cache.layout: got \"page_first_direct\" with io_backend \"" + hc->io_backend +
                          "\", expected io_backend \"direct\" for that layout");
  }
  std::optional<bool> defer;
  KVPOOL_RETURN_IF_ERROR(r.get_bool("defer_completion", false, &defer));
  hc->defer_completion = defer.value_or(false);
  return r.finish();
}

// "host:port" with a non-empty host and a port in [1, 65535].
bool is_server_address(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size() || s.size() - colon - 1 > 5) return false;
  int64_t port = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    port = port * 10 + (s[i] - '0');
  }
  return port >= 1 && port <= 65535;
}

// The backend's own keys: a directory for "file", servers for the distributed ones.
Status parse_storage_backend(JsonReader& r, StorageConfig* st) {
  std::optional<std::string> path;
  std::optional<int64_t> max_bytes, replicas, timeout_ms;
  std::optional<std::vector<std::string>> servers;
  std::optional<double> retry;
  std::optional<bool> mapped_reads;
  const bool file = st->backend == "file";
  const auto only_for = [&](const char* key, const char* backends) -> Status {
    if (!r.has(key)) return Status::ok();
    return Status::config(r.path_of(key) + ": given for backend \"" + st->backend + "\", expected only with " +
                          backends);
  };
  if (st->backend == "custom") {  // the engine's callbacks (kvpool_create_with_storage()): nothing to configure
    for (const char* key :
         {"path", "max_bytes", "mapped_reads", "servers", "replicas", "timeout_ms", "retry_timeout_s"}) {
      if (r.has(key)) {
        return Status::config(r.path_of(key) + ": given for backend \"custom\", expected none (the engine's "
                              "kvstore_backend callbacks are the whole backend)");
      }
    }
    return Status::ok();
  }
  if (file) {
    KVPOOL_RETURN_IF_ERROR(r.get_string("path", true, &path));
    if (path->empty()) return r.error_at("path", "\"\"", "a non-empty directory path");
    st->path = *path;
    KVPOOL_RETURN_IF_ERROR(r.get_int("max_bytes", 0, int64_t(1) << 62, false, &max_bytes));
    st->max_bytes = max_bytes.value_or(0);
    KVPOOL_RETURN_IF_ERROR(r.get_bool("mapped_reads", false, &mapped_reads));
    st->mapped_reads = mapped_reads.value_or(true);
    for (const char* key : {"servers", "replicas", "timeout_ms", "retry_timeout_s"}) {
      KVPOOL_RETURN_IF_ERROR(only_for(key, "backend \"memcached\" or \"redis\""));
    }
    return Status::ok();
  }
  KVPOOL_RETURN_IF_ERROR(only_for("path", "backend \"file\""));
  KVPOOL_RETURN_IF_ERROR(only_for("max_bytes", "backend \"file\""));
  KVPOOL_RETURN_IF_ERROR(only_for("mapped_reads", "backend \"file\""));
  KVPOOL_RETURN_IF_ERROR(r.get_string_array("servers", true, &servers));
  if (servers->empty()) return r.error_at("servers", "[]", "at least one \"host:port\"");
  for (size_t i = 0; i < servers->size(); ++i) {
    if (!is_server_address((*servers)[i])) {
      return Status::config(r.path_of("servers") + "[" + std::to_string(i) + "]: got \"" + (*servers)[i] +
                            "\", expected \"host:port\" with a port in [1, 65535]");
    }
  }
  st->servers = *servers;
  if (st->backend == "memcached") {
    KVPOOL_RETURN_IF_ERROR(r.get_int("replicas", 0, int64_t(st->servers.size()) - 1, false, &replicas));
    st->replicas = replicas.value_or(0);
    KVPOOL_RETURN_IF_ERROR(r.get_number("retry_timeout_s", 0.0, 3600.0, false, false, &retry));
    st->retry_timeout_s = retry.value_or(2.0);
  } else {
    KVPOOL_RETURN_IF_ERROR(only_for("replicas", "backend \"memcached\" (redis replicas are listed in servers)"));
    KVPOOL_RETURN_IF_ERROR(only_for("retry_timeout_s", "backend \"memcached\""));
  }
  KVPOOL_RETURN_IF_ERROR(r.get_int("timeout_ms", 1, 600000, false, &timeout_ms));
  st->timeout_ms = timeout_ms.value_or(1000);
  return Status::ok();
}

Status parse_storage(const cJSON* obj, const HostCacheConfig& hc, StorageConfig* st) {
  if (obj == nullptr) return Status::ok();
  st->enabled = true;
  JsonReader r(obj, "$.storage");
  std::optional<std::string> backend, policy;
  std::optional<int64_t> threshold;
  std::optional<double> base, per_ki;
  KVPOOL_RETURN_IF_ERROR(r.get_choice("backend", {"file", "memcached", "redis", "custom"}, true, &backend));
  st->backend = *backend;
  KVPOOL_RETURN_IF_ERROR(parse_storage_backend(r, st));
  KVPOOL_RETURN_IF_ERROR(r.get_choice("prefetch_policy", {"best_effort", "wait_complete", "timeout"}, false, &policy));
  st->prefetch_policy = policy.value_or("best_effort");
  KVPOOL_RETURN_IF_ERROR(r.get_int("prefetch_threshold_tokens", 0, int64_t(1) << 40, false, &threshold));
  st->prefetch_threshold_tokens = threshold.value_or(256);
  KVPOOL_RETURN_IF_ERROR(r.get_number("prefetch_timeout_base_s", 0.0, 3600.0, false, false, &base));
  st->prefetch_timeout_base_s = base.value_or(1.0);
  KVPOOL_RETURN_IF_ERROR(r.get_number("prefetch_timeout_per_ki_token_s", 0.0, 3600.0, false, false, &per_ki));
  st->prefetch_timeout_per_ki_token_s = per_ki.value_or(0.25);
  if (!hc.enabled) {
    return Status::config("$.storage: got a storage tier without $.host_cache, expected a host_cache section "
                          "(the storage tier sits below the host tier)");
  }
  return r.finish();
}

// Rules that involve several sections.
Status check_consistency(const Config& c) {
  const ModelConfig& m = c.model;
  const PoolConfig& p = c.pool;
  const std::string variant = attention_name(m.attention);
  const auto page_error = [&](const std::string& expected) {
    return Status::config("$.pool.page_size: got " + std::to_string(p.page_size) + ", expected " + expected +
                          " for attention \"" + variant + "\"");
  };
  if (m.attention == Attention::kSWA && p.page_size != 1) return page_error("1");
  if (m.attention == Attention::kNSA && p.page_size != 64) return page_error("64");
  if (m.attention == Attention::kHybridLinear && c.prefix_cache.kind == PrefixCacheKind::kRadix) {
    if (!p.mamba_extra_buffer && p.page_size != 1) {
      return page_error("1 with the mamba radix cache unless pool.mamba_extra_buffer is true");
    }
    if (p.mamba_extra_buffer && 64 % p.page_size != 0) {
      return page_error("a divisor of 64 with pool.mamba_extra_buffer");
    }
  }
  const auto dtype_error = [&](const std::string& expected) {
    return Status::config("$.pool.kv_dtype: got \"" + std::string(dtype_name(p.kv_dtype)) + "\", expected " +
                          expected + " for attention \"" + variant + "\"");
  };
  if (m.attention == Attention::kNSA && (p.kv_dtype == DType::kFP8E5M2 || p.kv_dtype == DType::kFP4E2M1)) {
    return dtype_error("f32, f16, bf16 or fp8_e4m3");
  }
  if (m.attention == Attention::kDoubleSparse && (is_fp8(p.kv_dtype) || p.kv_dtype == DType::kFP4E2M1)) {
    return dtype_error("f32, f16 or bf16");
  }
  // Tensor parallelism divides KV heads; fewer heads than ranks means replication.
  const int tp = c.parallel.tp_size;
  if (m.kv_heads > 0 && tp > 1) {
    const bool ok = m.kv_heads >= tp ? m.kv_heads % tp == 0 : tp % m.kv_heads == 0;
    if (!ok) {
      return Status::config("$.parallel.tp_size: got " + std::to_string(tp) + " with model.kv_heads " +
                            std::to_string(m.kv_heads) + ", expected one to divide the other");
    }
  }
  if (p.kv_dtype == DType::kFP4E2M1) {
    const int64_t heads = m.kv_heads > 0 ? std::max(1, m.kv_heads / tp) : 0;
    const int64_t row = m.kv_heads > 0 ? heads * m.head_dim : int64_t(m.kv_lora_rank) + m.qk_rope_head_dim;
    if (row % 16 != 0) {
      return dtype_error("a row width that is a multiple of 16 (fp4 scales cover blocks of 16; the row has " +
                         std::to_string(row) + " values)");
    }
  }
  return Status::ok();
}

}  // namespace

const char* attention_name(Attention a) {
  switch (a) {
    case Attention::kMHA: return "mha";
    case Attention::kMLA: return "mla";
    case Attention::kNSA: return "nsa";
    case Attention::kSWA: return "swa";
    case Attention::kHybridLinear: return "hybrid_linear";
    case Attention::kDoubleSparse: return "double_sparse";
  }
  return "?";
}

Status parse_config(const char* json, size_t json_len, Config* out) {
  if (json == nullptr) return Status::invalid("configuration: json is NULL");
  std::unique_ptr<cJSON, JsonDeleter> root(cJSON_ParseWithLength(json, json_len));
  if (!root) {
    // cJSON returns NULL for a syntax error and for a failed malloc alike. Parsing
    // again tells them apart when the shortage has passed: a text that parses now
    // is valid, so the first failure was memory (a lasting shortage still reads as
    // a syntax error).
    std::unique_ptr<cJSON, JsonDeleter> again(cJSON_ParseWithLength(json, json_len));
    if (again) return Status(KVPOOL_ERR_HOST_MEMORY, "configuration: out of host memory while parsing the JSON");
    const char* where = cJSON_GetErrorPtr();
    size_t offset = (where != nullptr && where >= json && where <= json + json_len) ? size_t(where - json) : json_len;
    return Status::config("$: malformed JSON near byte " + std::to_string(offset) + ", expected a JSON object");
  }
  if (!cJSON_IsObject(root.get())) {
    return Status::config("$: got " + describe_json_value(root.get()) + ", expected a JSON object");
  }
  Config c;
  JsonReader r(root.get(), "$");
  std::optional<int64_t> version;
  KVPOOL_RETURN_IF_ERROR(r.get_int("version", 1, 1, false, &version));
  const cJSON *model = nullptr, *pool = nullptr, *parallel = nullptr, *prefix = nullptr, *host = nullptr,
              *storage = nullptr;
  KVPOOL_RETURN_IF_ERROR(r.get_object("model", true, &model));
  KVPOOL_RETURN_IF_ERROR(r.get_object("pool", true, &pool));
  KVPOOL_RETURN_IF_ERROR(r.get_object("parallel", false, &parallel));
  KVPOOL_RETURN_IF_ERROR(r.get_object("prefix_cache", false, &prefix));
  KVPOOL_RETURN_IF_ERROR(r.get_object("host_cache", false, &host));
  KVPOOL_RETURN_IF_ERROR(r.get_object("storage", false, &storage));
  KVPOOL_RETURN_IF_ERROR(r.finish());

  KVPOOL_RETURN_IF_ERROR(parse_model(model, &c.model));
  KVPOOL_RETURN_IF_ERROR(parse_pool(pool, c.model, &c.pool));
  KVPOOL_RETURN_IF_ERROR(parse_parallel(parallel, c.model.num_layers, &c.parallel));
  KVPOOL_RETURN_IF_ERROR(parse_prefix_cache(prefix, &c.prefix_cache));
  KVPOOL_RETURN_IF_ERROR(parse_host_cache(host, &c.host_cache));
  KVPOOL_RETURN_IF_ERROR(parse_storage(storage, c.host_cache, &c.storage));
  KVPOOL_RETURN_IF_ERROR(check_consistency(c));
  *out = std::move(c);
  return Status::ok();
}

}  // namespace kvp::config
