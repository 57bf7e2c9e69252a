// API fuzz target, host family: 2-layer mha (or mla) pools with the radix cache and a
// small host tier (host_cache, 1.25x to 3x the device tokens), so that device eviction
// keeps nodes on the host, load-backs evict device nodes and copies evict host nodes.
// The kvhost_* ops (api_fuzz_ops_host.cpp) run among every op of the other targets.
// Two config bytes: the first picks the write policy, host layout, page size 1/4/16,
// host ratio, direct allocation and KV events; the second the eviction policy, the
// kvseq eviction rule, the io backend, the disaggregation mode and mha or mla.
#include <string>

#include "api_fuzz_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfuzz::Input in(data, size);
  const unsigned v = in.u8();
  const unsigned w = in.u8();
  static const char* policies[] = {"write_through", "write_through_selective", "write_back"};
  static const char* layouts[] = {"layer_first", "page_first", "page_first_direct", "page_head"};
  static const int pages[] = {1, 4, 16};
  static const char* ratios[] = {"1.25", "1.5", "3"};
  static const char* evictions[] = {"lru", "lfu", "priority", "mru"};
  static const char* modes[] = {"none", "prefill", "decode"};
  const int page = pages[(v / 12) % 3];
  const int tokens = page == 16 ? 128 : 64;  // 8 pages of 16, or 16 / 64 pages
  const bool mla = (w / 48) % 4 == 3;
  std::string layout = layouts[(v / 3) % 4];
  if (mla && layout == "page_head") layout = "layer_first";  // page_head splits rows by head: mha only
  const bool direct_io = layout == "page_first_direct" || (w / 8) % 2 == 1;
  kvfuzz::Family fam;
  fam.host = true;
  fam.direct_alloc = (v / 108) % 2 == 0;
  const std::string model = mla ? R"({"num_layers": 2, "attention": "mla", "kv_lora_rank": 8, "qk_rope_head_dim": 4})"
                                : R"({"num_layers": 2, "kv_heads": 1, "head_dim": 4})";
  const std::string json = R"({"model": )" + model + R"(, "pool": {"kv_dtype": "f32", "page_size": )" +
                           std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
                           R"(, "max_running_requests": 4, "max_context_len": 64, "disaggregation_mode": ")" +
                           modes[(w / 16) % 3] + R"("}, "prefix_cache": {"kind": "radix", "eviction": ")" +
                           evictions[w % 4] + R"(", "events": )" + (v >= 216 ? "true" : "false") +
                           R"(, "evict_rule": ")" + ((w / 4) % 2 ? "sglang" : "shortfall") +
                           R"("}, "host_cache": {"ratio": )" + ratios[(v / 36) % 3] +
                           R"(, "headroom_bytes": 0, "write_policy": ")" + policies[v % 3] + R"(", "layout": ")" + layout +
                           R"(", "io_backend": ")" + (direct_io ? "direct" : "kernel") + "\"}}";
  kvfuzz::run_api_program(json, fam, in);
  return 0;
}
