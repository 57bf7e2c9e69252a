// API fuzz target, hybrid_linear family: one full-attention layer plus mamba
// layers with SGLang's MambaRadixCache (page 1). The first byte picks the
// number of state slots (few: state pressure; more: KV pressure), the
// disaggregation mode, direct allocation (kvalloc_* / kvpool_mamba_alloc) on or off, and
// a host tier of the full-attention KV (with a write policy; kvhost_* ops then run too).
#include <string>

#include "api_fuzz_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfuzz::Input in(data, size);
  const unsigned v = in.u8();
  static const int states[] = {5, 10, 20};
  static const char* modes[] = {"none", "prefill"};
  kvfuzz::Family fam;
  fam.mamba = true;
  fam.direct_alloc = (v / 6) % 2 == 0;
  const int s = states[v % 3];
  static const char* policies[] = {"write_through", "write_through_selective", "write_back"};
  fam.host = (v / 12) % 2 == 1;
  const std::string host = fam.host ? std::string(R"(, "host_cache": {"ratio": 3, "headroom_bytes": 0, "write_policy": ")") +
                                          policies[(v / 24) % 3] + "\"}"
                                    : std::string();
  const std::string json =
      R"({"model": {"num_layers": 2, "attention": "hybrid_linear", "kv_heads": 1, "head_dim": 4,
          "full_attention_layers": [1], "mamba": {"conv_shape": [2, 2], "ssm_shape": [2, 2],
          "conv_dtype": "f32", "ssm_dtype": "f32"}},
          "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": )" +
      std::to_string(s / 5) + R"(, "mamba_cache_size": )" + std::to_string(s) +
      R"(, "max_context_len": 64, "disaggregation_mode": ")" + modes[(v / 3) % 2] +
      R"("}, "prefix_cache": {"kind": "radix"})" + host + "}";
  kvfuzz::run_api_program(json, fam, in);
  return 0;
}
