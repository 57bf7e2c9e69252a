// API fuzz target, mha family: paged (and page 1) pools with the radix prefix
// cache. The first byte picks the config: page size 1/4/16, disaggregation
// mode (need_sort), eviction policy, KV events, the kvseq eviction rule, and whether the program may
// allocate slots directly (kvalloc_*) or only through kvseq_* / radix_*.
#include <string>

#include "api_fuzz_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfuzz::Input in(data, size);
  const unsigned v = in.u8();
  static const int pages[] = {1, 4, 16};
  static const char* modes[] = {"none", "prefill", "decode"};
  static const char* evictions[] = {"lru", "lfu", "priority", "mru"};
  const int page = pages[v % 3];
  const int tokens = page == 16 ? 128 : 64;  // 8 pages of 16, or 16 / 64 pages
  kvfuzz::Family fam;
  fam.direct_alloc = (v / 9) % 2 == 0;
  const std::string json =
      R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 4}, "pool": {"kv_dtype": "f32", "page_size": )" +
      std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
      R"(, "max_running_requests": 4, "max_context_len": 64, "disaggregation_mode": ")" + modes[(v / 3) % 3] +
      R"("}, "prefix_cache": {"kind": "radix", "eviction": ")" + evictions[(v / 18) % 4] +
      R"(", "events": )" + ((v / 72) % 2 ? "true" : "false") + R"(, "evict_rule": ")" +
      (v >= 144 ? "sglang" : "shortfall") + "\"}}";
  kvfuzz::run_api_program(json, fam, in);
  return 0;
}
