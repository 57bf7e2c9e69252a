// A backend without streamed calls over one that has them (the file backend): the storage
// tier then stages its pages in memory and checks each as it copies it into its host page,
// as it does for memcached, redis and callback backends. The tests and bench_storage_file
// use it to run that path on real files.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "storage/blob_store.hpp"

namespace kvtest {

class UnstreamedStore final : public kvp::storage::BlobStore {
 public:
  explicit UnstreamedStore(std::unique_ptr<kvp::storage::BlobStore> inner) : inner_(std::move(inner)) {}
  std::string describe() const override { return inner_->describe(); }
  void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
           kvp::storage::BlobResult* out) override {
    inner_->put(keys, values, sizes, n, out);
  }
  void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
           kvp::storage::BlobResult* out) override {
    inner_->get(keys, dst, capacity, n, sizes, out);
  }
  size_t exists_prefix(const std::string* keys, size_t n) override { return inner_->exists_prefix(keys, n); }
  kvp::Status clear() override { return inner_->clear(); }
  kvp::storage::BlobStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<kvp::storage::BlobStore> inner_;
};

}  // namespace kvtest
