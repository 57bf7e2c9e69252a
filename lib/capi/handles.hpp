// Registry of live handles. Every entry point checks its handle here before
// touching it, so NULL, foreign and already-destroyed handles are reported as
// KVPOOL_ERR_INVALID_ARGUMENT instead of being dereferenced.
#pragma once

#include <string>

namespace kvp::capi {

enum class HandleKind { kPool };

void register_handle(const void* handle, HandleKind kind);
// Returns true if `handle` was live (and is now forgotten).
bool unregister_handle(const void* handle, HandleKind kind);
bool is_live_handle(const void* handle, HandleKind kind);

}  // namespace kvp::capi
