// XXH3-64 compiled for AVX-512 (this file alone is built with -mavx512f: lib/CMakeLists.txt);
// payload_hash.cpp calls it only where the CPU has AVX-512F.
#define KVP_PAYLOAD_HASH_NAME "avx512"
#define KVP_PAYLOAD_HASH_FN avx512_build
#include "storage/payload_hash_impl.inc"
