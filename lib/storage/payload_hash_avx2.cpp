// XXH3-64 compiled for AVX2 (this file alone is built with -mavx2: lib/CMakeLists.txt);
// payload_hash.cpp calls it only where the CPU has AVX2.
#define KVP_PAYLOAD_HASH_NAME "avx2"
#define KVP_PAYLOAD_HASH_FN avx2_build
#include "storage/payload_hash_impl.inc"
