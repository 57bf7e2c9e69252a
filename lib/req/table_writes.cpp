#include "req/table_writes.hpp"

#include <cstring>

#include "kvpool/buffers.h"

namespace kvp::req {
namespace {

// CPU pools: the table is host memory, so each write lands at once.
class HostTableWrites final : public TableWrites {
 public:
  explicit HostTableWrites(RequestTable* table) : table_(table) {}
  Status reserve(size_t, size_t) override { return Status::ok(); }
  Status add(int32_t row, size_t start, const int64_t* slots, size_t n) override {
    return table_->write(row, start, slots, n);
  }
  Status reserve_cells(size_t) override { return Status::ok(); }
  Status add_cells(const TableCell* cells, const int64_t* slots, size_t n) override {
    return table_->write_cells(cells, slots, n);
  }
  Status flush(void*, const int64_t* out_host, int64_t* out, size_t out_n) override {
    if (out != nullptr && out_n > 0 && out != out_host) std::memmove(out, out_host, out_n * sizeof(int64_t));
    return Status::ok();
  }
  void discard() override {}
  bool deferred() const override { return false; }

 private:
  RequestTable* table_;
};

}  // namespace

std::unique_ptr<TableWrites> make_host_table_writes(RequestTable* table) {
  return std::unique_ptr<TableWrites>(new HostTableWrites(table));
}

Status TableWrites::make(backend::Backend* backend, RequestTable* table, backend::DeviceFault* fault,
                         std::unique_ptr<TableWrites>* out) {
  if (backend->device_type() == KVPOOL_DEVICE_CUDA) {
    return make_device_table_writes(table, fault, backend->device_id(), out);
  }
  *out = make_host_table_writes(table);
  return Status::ok();
}

}  // namespace kvp::req
