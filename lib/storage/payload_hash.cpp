#include "storage/payload_hash.hpp"

namespace kvp::storage {
namespace payload_hash_detail {

#if defined(KVPOOL_X86_PAYLOAD_HASH)
const Impl* avx2_build();
const Impl* avx512_build();

// __builtin_cpu_supports also checks that the OS saves the wider registers.
const Impl* avx2_impl() { return __builtin_cpu_supports("avx2") ? avx2_build() : nullptr; }
const Impl* avx512_impl() { return __builtin_cpu_supports("avx512f") ? avx512_build() : nullptr; }
#else
const Impl* avx2_impl() { return nullptr; }
const Impl* avx512_impl() { return nullptr; }
#endif

}  // namespace payload_hash_detail

const payload_hash_detail::Impl* PayloadHash::best() {
  using namespace payload_hash_detail;
  static const Impl* const chosen = [] {
    if (const Impl* impl = avx512_impl()) return impl;
    if (const Impl* impl = avx2_impl()) return impl;
    return generic_impl();
  }();
  return chosen;
}

}  // namespace kvp::storage
