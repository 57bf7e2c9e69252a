// API fuzz target, mla family: compressed-KV pools (one row per token) with the
// radix prefix cache; the first byte picks page size 1/4/16, disaggregation
// mode, a radix / chunk / no prefix cache, and direct allocation on or off.
#include <string>

#include "api_fuzz_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfuzz::Input in(data, size);
  const unsigned v = in.u8();
  static const int pages[] = {1, 4, 16};
  static const char* modes[] = {"none", "prefill", "decode"};
  static const char* caches[] = {"radix", "radix", "chunk", "none"};
  const int page = pages[v % 3];
  const int tokens = page == 16 ? 128 : 64;
  kvfuzz::Family fam;
  fam.direct_alloc = (v / 9) % 2 == 0;
  const std::string json =
      R"({"model": {"num_layers": 1, "attention": "mla", "kv_lora_rank": 8, "qk_rope_head_dim": 4},
          "pool": {"kv_dtype": "bf16", "page_size": )" +
      std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
      R"(, "max_running_requests": 4, "max_context_len": 64, "disaggregation_mode": ")" + modes[(v / 3) % 3] +
      R"("}, "prefix_cache": {"kind": ")" + caches[(v / 18) % 4] + R"("}})";
  kvfuzz::run_api_program(json, fam, in);
  return 0;
}
