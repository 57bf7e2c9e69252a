// Gate for GPU tests: skip without a device, fail when KVPOOL_REQUIRE_GPU=1.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kvpool/kvpool.h"

#define KVPOOL_REQUIRE_CUDA_DEVICE()                                                          \
  do {                                                                                        \
    if (kvpool_cuda_device_count() == 0) {                                                    \
      const char* require = std::getenv("KVPOOL_REQUIRE_GPU");                                \
      if (require != nullptr && std::strcmp(require, "1") == 0) {                             \
        FAIL() << "KVPOOL_REQUIRE_GPU=1 but no usable CUDA device (or a build without CUDA)"; \
      }                                                                                       \
      GTEST_SKIP() << "no CUDA device";                                                       \
    }                                                                                         \
  } while (0)

namespace kvtest {

// `json` (a config whose "pool" object is written `"pool": {`) with the pool's device set:
// the GPU tests build the same pool on "cpu" and "cuda" and compare them.
inline std::string with_device(std::string json, const std::string& device) {
  const std::string key = "\"pool\": {";
  json.replace(json.find(key), key.size(), key + "\"device\": \"" + device + "\", ");
  return json;
}

}  // namespace kvtest
