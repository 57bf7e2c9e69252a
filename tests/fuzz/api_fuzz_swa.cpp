// API fuzz target, swa family: a full pool and a sliding-window pool (page 1)
// with SGLang's SWARadixCache. The first byte picks the window (2/4/8), the
// window pool's share (0.5 / 1.0), disaggregation mode (need_sort) and direct
// allocation on or off.
#include <string>

#include "api_fuzz_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfuzz::Input in(data, size);
  const unsigned v = in.u8();
  static const int windows[] = {2, 4, 8};
  static const char* ratios[] = {"0.5", "1.0"};
  static const char* modes[] = {"none", "prefill", "decode"};
  kvfuzz::Family fam;
  fam.swa = true;
  fam.direct_alloc = (v / 18) % 2 == 0;
  const std::string json =
      R"({"model": {"num_layers": 2, "attention": "swa", "kv_heads": 1, "head_dim": 4, "sliding_window": )" +
      std::to_string(windows[v % 3]) +
      R"(, "swa_layer_pattern": "SF"}, "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "swa_full_tokens_ratio": )" +
      ratios[(v / 3) % 2] + R"(, "max_running_requests": 4, "max_context_len": 64, "disaggregation_mode": ")" +
      modes[(v / 6) % 3] + R"("}, "prefix_cache": {"kind": "radix"}})";
  kvfuzz::run_api_program(json, fam, in);
  return 0;
}
