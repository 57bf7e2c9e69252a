// XXH3-64 for any CPU (the compiler's baseline vector unit: SSE2 on x86-64, NEON on arm64).
#define KVP_PAYLOAD_HASH_NAME "generic"
#define KVP_PAYLOAD_HASH_FN generic_impl
#include "storage/payload_hash_impl.inc"
