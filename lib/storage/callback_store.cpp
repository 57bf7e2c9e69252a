#include "storage/callback_store.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "util/callback_scope.hpp"

namespace kvp::storage {
namespace {

class CallbackStore final : public BlobStore {
 public:
  explicit CallbackStore(const kvstore_backend& table) : t_(table) {}

  std::string describe() const override { return "custom"; }

  void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
           BlobResult* out) override {
    uint64_t stored = 0, bytes = 0, errors = 0;
    const char* k[kCallbackBatch];
    int32_t r[kCallbackBatch];
    for (size_t start = 0; start < n; start += kCallbackBatch) {
      const size_t m = std::min(kCallbackBatch, n - start);
      for (size_t i = 0; i < m; ++i) {
        k[i] = keys[start + i].c_str();
        r[i] = KVSTORE_ERROR;
      }
      {
        util::UserCallbackScope scope;
        t_.put(t_.user, k, values + start, sizes + start, m, r);
      }
      for (size_t i = 0; i < m; ++i) {
        if (r[i] == KVSTORE_OK) {
          out[start + i] = BlobResult::kOk;
          ++stored;
          bytes += sizes[start + i];
        } else {  // KVSTORE_ERROR, KVSTORE_MISS (no put result) or garbage
          out[start + i] = BlobResult::kError;
          ++errors;
        }
      }
    }
    puts_.fetch_add(stored, std::memory_order_relaxed);
    put_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    put_errors_.fetch_add(errors, std::memory_order_relaxed);
  }

  void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
           BlobResult* out) override {
    uint64_t hits = 0, bytes = 0, misses = 0, errors = 0;
    const char* k[kCallbackBatch];
    int32_t r[kCallbackBatch];
    for (size_t start = 0; start < n; start += kCallbackBatch) {
      const size_t m = std::min(kCallbackBatch, n - start);
      for (size_t i = 0; i < m; ++i) {
        k[i] = keys[start + i].c_str();
        r[i] = KVSTORE_ERROR;
        sizes[start + i] = 0;
      }
      {
        util::UserCallbackScope scope;
        t_.get(t_.user, k, dst + start, capacity + start, m, sizes + start, r);
      }
      for (size_t i = 0; i < m; ++i) {
        const size_t j = start + i;
        if (r[i] == KVSTORE_OK) {
          out[j] = BlobResult::kOk;
          ++hits;
          bytes += std::min(sizes[j], capacity[j]);
        } else if (r[i] == KVSTORE_MISS) {
          out[j] = BlobResult::kMiss;
          ++misses;
        } else {
          out[j] = BlobResult::kError;
          ++errors;
        }
      }
    }
    gets_.fetch_add(n, std::memory_order_relaxed);
    get_hits_.fetch_add(hits, std::memory_order_relaxed);
    get_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    get_misses_.fetch_add(misses, std::memory_order_relaxed);
    get_errors_.fetch_add(errors, std::memory_order_relaxed);
  }

  size_t exists_prefix(const std::string* keys, size_t n) override {
    exists_calls_.fetch_add(1, std::memory_order_relaxed);
    size_t found = 0;
    const char* k[kCallbackBatch];
    for (size_t start = 0; start < n; start += kCallbackBatch) {
      const size_t m = std::min(kCallbackBatch, n - start);
      for (size_t i = 0; i < m; ++i) k[i] = keys[start + i].c_str();
      size_t got = 0;
      {
        util::UserCallbackScope scope;
        got = std::min(t_.exists_prefix(t_.user, k, m), m);
      }
      found += got;
      if (got < m) break;
    }
    return found;
  }

  Status clear() override {
    if (t_.clear == nullptr) {
      return Status::unsupported("the custom storage backend has no clear callback (kvstore_backend.clear is NULL)");
    }
    int32_t rc = KVSTORE_ERROR;
    {
      util::UserCallbackScope scope;
      rc = t_.clear(t_.user);
    }
    if (rc != KVSTORE_OK) {
      return Status::io("the custom storage backend's clear callback failed (returned " + std::to_string(rc) +
                        ", expected KVSTORE_OK)");
    }
    return Status::ok();
  }

  BlobStats stats() const override {
    const auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    BlobStats s;
    s.puts = load(puts_);
    s.put_bytes = load(put_bytes_);
    s.put_errors = load(put_errors_);
    s.gets = load(gets_);
    s.get_hits = load(get_hits_);
    s.get_bytes = load(get_bytes_);
    s.get_misses = load(get_misses_);
    s.get_errors = load(get_errors_);
    s.exists_calls = load(exists_calls_);
    return s;
  }

 private:
  const kvstore_backend t_;
  std::atomic<uint64_t> puts_{0}, put_bytes_{0}, put_errors_{0};
  std::atomic<uint64_t> gets_{0}, get_hits_{0}, get_bytes_{0}, get_misses_{0}, get_errors_{0};
  std::atomic<uint64_t> exists_calls_{0};
};

}  // namespace

Status check_backend_table(const kvstore_backend* table) {
  if (table == nullptr) {
    return Status::invalid("backend is NULL (kvpool_create() opens the built-in backends the configuration names)");
  }
  if (table->struct_size < sizeof(kvstore_backend)) {
    return Status::invalid("backend->struct_size is " + std::to_string(table->struct_size) + ", expected at least " +
                           std::to_string(sizeof(kvstore_backend)) + " (sizeof(kvstore_backend))");
  }
  std::string missing;
  int count = 0;
  const auto need = [&](bool set, const char* name) {
    if (set) return;
    missing += missing.empty() ? "backend->" : " and ->";
    missing += name;
    ++count;
  };
  need(table->put != nullptr, "put");
  need(table->get != nullptr, "get");
  need(table->exists_prefix != nullptr, "exists_prefix");
  if (!missing.empty()) {
    return Status::invalid(missing + (count > 1 ? " are" : " is") + " NULL, expected a function (put, get and exists_prefix are required; "
                           "clear and destroy are optional)");
  }
  return Status::ok();
}

std::unique_ptr<BlobStore> make_callback_store(const kvstore_backend& table) {
  return std::make_unique<CallbackStore>(table);
}

BackendRelease::~BackendRelease() {
  if (destroy_ != nullptr) destroy_(user_);
}

}  // namespace kvp::storage
