#include "mamba/mamba_pool.hpp"

#include <algorithm>
#include <string>

namespace kvp::mamba {

MambaPool::MambaPool(backend::Backend* backend, const MambaShape& shape, int64_t request_rows)
    : backend_(backend),
      shape_(shape),
      slots_(shape.slots, alloc::GiveBackOrder::kAppend, false, "mamba slot"),
      row_slot_(static_cast<size_t>(request_rows), -1),
      ping_pong_(static_cast<size_t>(request_rows), {-1, -1}),
      kept_(shape.ping_pong ? static_cast<size_t>(shape.slots) + 1 : 0, {-1, -1}) {
  slots_.reserve_scratch();  // freeing state slots (after other changes) never allocates
  scratch_.reserve(static_cast<size_t>(shape.slots));  // free()'s copy of the ids, likewise
}

Status MambaPool::make(backend::Backend* backend, const MambaShape& shape, int64_t request_rows,
                       std::unique_ptr<MambaPool>* out) {
  std::unique_ptr<MambaPool> m(new MambaPool(backend, shape, request_rows));
  const size_t layers = shape.layers.size(), rows = static_cast<size_t>(shape.slots) + 1;
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, layers * rows * shape.conv_bytes, &m->conv_));
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, layers * rows * shape.ssm_bytes, &m->ssm_));
  if (shape.draft_tokens > 0) {
    const size_t spec_rows = static_cast<size_t>(shape.spec_slots) + 1, draft = static_cast<size_t>(shape.draft_tokens);
    KVPOOL_RETURN_IF_ERROR(
        backend::DeviceMemory::make(backend, layers * spec_rows * draft * shape.conv_bytes, &m->inter_conv_));
    KVPOOL_RETURN_IF_ERROR(
        backend::DeviceMemory::make(backend, layers * spec_rows * draft * shape.ssm_bytes, &m->inter_ssm_));
  }
  *out = std::move(m);
  return Status::ok();
}

int MambaPool::layer_index(int layer) const {
  auto it = std::find(shape_.layers.begin(), shape_.layers.end(), layer);
  return it == shape_.layers.end() ? -1 : static_cast<int>(it - shape_.layers.begin());
}

char* MambaPool::conv_at(size_t layer, int64_t slot) const {
  const size_t rows = static_cast<size_t>(shape_.slots) + 1;
  return conv_.as<char>() + (layer * rows + static_cast<size_t>(slot)) * shape_.conv_bytes;
}

char* MambaPool::ssm_at(size_t layer, int64_t slot) const {
  const size_t rows = static_cast<size_t>(shape_.slots) + 1;
  return ssm_.as<char>() + (layer * rows + static_cast<size_t>(slot)) * shape_.ssm_bytes;
}

// A slot's rows are one per layer, a layer's rows apart: one strided call per state kind
// (on CUDA two launches, not two per layer).
size_t MambaPool::layer_stride(size_t row_bytes) const { return (static_cast<size_t>(shape_.slots) + 1) * row_bytes; }

Status MambaPool::zero_slot(int64_t slot) {
  const size_t layers = shape_.layers.size();
  KVPOOL_RETURN_IF_ERROR(backend_->zero_rows(conv_at(0, slot), layer_stride(shape_.conv_bytes), shape_.conv_bytes, layers));
  return backend_->zero_rows(ssm_at(0, slot), layer_stride(shape_.ssm_bytes), shape_.ssm_bytes, layers);
}

Status MambaPool::check_slot(int32_t slot, const char* what) const {
  if (!slots_.owned(slot)) {
    return Status::invalid(std::string(what) + " mamba slot " + std::to_string(slot) +
                           (slot <= 0 || slot > shape_.slots ? " is out of range [1, " + std::to_string(shape_.slots) + "]"
                                                             : " is not allocated"));
  }
  return Status::ok();
}

Status MambaPool::alloc(int32_t* out, size_t n) {
  KVPOOL_RETURN_IF_ERROR(take(out, n));
  for (size_t i = 0; i < n; ++i) KVPOOL_RETURN_IF_ERROR(zero_slot(out[i]));
  return Status::ok();
}

Status MambaPool::take(int32_t* out, size_t n) {
  KVPOOL_RETURN_IF_ERROR(peek(out, n));
  commit_take(n);
  return Status::ok();
}

Status MambaPool::peek(int32_t* out, size_t n) {
  if (!slots_.can_take(n)) {
    return Status::out_of_memory("need " + std::to_string(n) + " mamba slots, " + std::to_string(slots_.available()) +
                                 " available");
  }
  slots_.prepare(n, false);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(slots_.peek(i));
  return Status::ok();
}

dev::States MambaPool::device_states() const {
  dev::States s;
  s.conv = conv_.as<uint8_t>();
  s.ssm = ssm_.as<uint8_t>();
  s.conv_bytes = shape_.conv_bytes;
  s.ssm_bytes = shape_.ssm_bytes;
  s.rows = static_cast<uint64_t>(shape_.slots) + 1;
  s.layers = static_cast<uint32_t>(shape_.layers.size());
  return s;
}

bool MambaPool::attached(int32_t slot) const {
  for (size_t row = 1; row < row_slot_.size(); ++row) {
    const auto& pp = ping_pong_[row];
    if (row_slot_[row] == slot || pp[0] == slot || pp[1] == slot) return true;
  }
  return false;
}

Status MambaPool::free_unattached(const int32_t* slots, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    for (size_t row = 1; row < row_slot_.size(); ++row) {
      const auto& pp = ping_pong_[row];
      if (row_slot_[row] == slots[i] || pp[0] == slots[i] || pp[1] == slots[i]) {
        return Status::invalid("mamba slot " + std::to_string(slots[i]) + " belongs to request row " +
                               std::to_string(row) + "; free it with kvreq_free_hybrid");
      }
    }
  }
  return free(slots, n);
}

Status MambaPool::free(const int32_t* slots, size_t n) {
  scratch_.assign(slots, slots + n);
  KVPOOL_RETURN_IF_ERROR(slots_.give_back(scratch_.data(), n, false));
  for (size_t i = 0; i < n && !kept_.empty(); ++i) kept_[static_cast<size_t>(slots[i])] = {-1, -1};
  return Status::ok();
}

Status MambaPool::copy(int32_t src, int32_t dst) {
  KVPOOL_RETURN_IF_ERROR(check_slot(src, "source"));
  KVPOOL_RETURN_IF_ERROR(check_slot(dst, "destination"));
  if (src == dst) return Status::ok();
  const size_t layers = shape_.layers.size(), conv = layer_stride(shape_.conv_bytes), ssm = layer_stride(shape_.ssm_bytes);
  KVPOOL_RETURN_IF_ERROR(
      backend_->copy_rows({conv_at(0, dst), conv, nullptr, conv_at(0, src), conv, nullptr, shape_.conv_bytes, layers}));
  return backend_->copy_rows({ssm_at(0, dst), ssm, nullptr, ssm_at(0, src), ssm, nullptr, shape_.ssm_bytes, layers});
}

Status MambaPool::fork(int32_t src, int32_t* dst) {
  KVPOOL_RETURN_IF_ERROR(check_slot(src, "source"));
  int32_t slot = 0;
  KVPOOL_RETURN_IF_ERROR(peek(&slot, 1));  // no zeroing: the copy overwrites every byte
  commit_take(1);  // copy() needs the destination owned
  const Status st = copy(src, slot);
  if (!st.is_ok()) {  // a failed copy (a CUDA error) gives the slot back
    (void)free(&slot, 1);
    return st;
  }
  *dst = slot;
  return Status::ok();
}

Status MambaPool::write(int layer, int32_t slot, const void* conv, size_t conv_bytes, const void* ssm, size_t ssm_bytes) {
  const int l = layer_index(layer);
  if (l < 0) return Status::invalid("layer " + std::to_string(layer) + " is not a mamba layer of this pool");
  KVPOOL_RETURN_IF_ERROR(check_slot(slot, "target"));
  if (conv_bytes != shape_.conv_bytes || ssm_bytes != shape_.ssm_bytes) {
    return Status::invalid("state sizes " + std::to_string(conv_bytes) + " + " + std::to_string(ssm_bytes) +
                           " bytes, expected " + std::to_string(shape_.conv_bytes) + " + " +
                           std::to_string(shape_.ssm_bytes));
  }
  if ((conv == nullptr && conv_bytes > 0) || (ssm == nullptr && ssm_bytes > 0)) return Status::invalid("state data is NULL");
  KVPOOL_RETURN_IF_ERROR(backend_->from_host(conv_at(static_cast<size_t>(l), slot), conv, conv_bytes));
  return backend_->from_host(ssm_at(static_cast<size_t>(l), slot), ssm, ssm_bytes);
}

Status MambaPool::read(int layer, int32_t slot, void* conv, size_t conv_bytes, void* ssm, size_t ssm_bytes) const {
  const int l = layer_index(layer);
  if (l < 0) return Status::invalid("layer " + std::to_string(layer) + " is not a mamba layer of this pool");
  if (slot < 0 || slot > shape_.slots) {
    return Status::invalid("mamba slot " + std::to_string(slot) + " is out of range [0, " + std::to_string(shape_.slots) + "]");
  }
  if (conv_bytes != shape_.conv_bytes || ssm_bytes != shape_.ssm_bytes) {
    return Status::invalid("state sizes " + std::to_string(conv_bytes) + " + " + std::to_string(ssm_bytes) +
                           " bytes, expected " + std::to_string(shape_.conv_bytes) + " + " +
                           std::to_string(shape_.ssm_bytes));
  }
  if ((conv == nullptr && conv_bytes > 0) || (ssm == nullptr && ssm_bytes > 0)) return Status::invalid("state buffer is NULL");
  KVPOOL_RETURN_IF_ERROR(backend_->to_host(conv, conv_at(static_cast<size_t>(l), slot), conv_bytes));
  return backend_->to_host(ssm, ssm_at(static_cast<size_t>(l), slot), ssm_bytes);
}

Status MambaPool::check_reuse(const int32_t* reuse, size_t n, size_t* new_slots) const {
  size_t fresh = 0;
  std::vector<int32_t> kept;
  for (size_t i = 0; i < n; ++i) {
    if (reuse[i] == -1) {
      fresh += slots_per_request();
      continue;
    }
    Status st = check_slot(reuse[i], "reused");
    if (!st.is_ok()) return Status::invalid("request " + std::to_string(i) + ": " + st.message());
    if (std::find(row_slot_.begin(), row_slot_.end(), reuse[i]) != row_slot_.end()) {
      return Status::invalid("request " + std::to_string(i) + ": mamba slot " + std::to_string(reuse[i]) +
                             " already belongs to an allocated row");
    }
    kept.push_back(reuse[i]);
    if (shape_.ping_pong && kept_[static_cast<size_t>(reuse[i])][0] < 0) fresh += 2;
  }
  std::sort(kept.begin(), kept.end());
  if (std::adjacent_find(kept.begin(), kept.end()) != kept.end()) {
    return Status::invalid("a mamba slot is reused by two requests of one batch");
  }
  if (fresh > slots_.available()) {
    return Status::out_of_memory("need " + std::to_string(fresh) + " mamba slots, " +
                                 std::to_string(slots_.available()) + " available");
  }
  *new_slots = fresh;
  return Status::ok();
}

Status MambaPool::attach(const int32_t* rows, const int32_t* reuse, size_t n, int32_t* slots_out) {
  for (size_t i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(rows[i]);
    int32_t slot = reuse[i];
    if (slot == -1) KVPOOL_RETURN_IF_ERROR(alloc(&slot, 1));
    row_slot_[row] = slot;
    slots_out[i] = slot;
    if (!shape_.ping_pong) continue;
    std::array<int32_t, 2>& kept = kept_[static_cast<size_t>(slot)];
    if (kept[0] >= 0) {
      ping_pong_[row] = kept;
      kept = {-1, -1};
    } else {
      int32_t pair[2];
      KVPOOL_RETURN_IF_ERROR(alloc(pair, 2));
      ping_pong_[row] = {pair[0], pair[1]};
    }
  }
  return Status::ok();
}

Status MambaPool::check_detach(const int32_t* rows, size_t n, bool free_state, int32_t keep) const {
  if (keep < -1 || keep > 1) return Status::invalid("keep is " + std::to_string(keep) + ", expected -1, 0 or 1");
  (void)free_state;
  for (size_t i = 0; i < n; ++i) {
    if (row_slot_[static_cast<size_t>(rows[i])] < 0) {
      return Status::invalid("row " + std::to_string(rows[i]) + " has no mamba slot (allocate it with kvreq_alloc_hybrid)");
    }
  }
  return Status::ok();
}

// Allocates nothing: kept_ and free()'s scratch are sized at creation, the ids to free
// fit on the stack, and check_detach has refused what give_back could refuse.
Status MambaPool::detach(const int32_t* rows, size_t n, bool free_state, int32_t keep) {
  for (size_t i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(rows[i]);
    const int32_t slot = row_slot_[row];
    const std::array<int32_t, 2> pp = ping_pong_[row];
    row_slot_[row] = -1;
    ping_pong_[row] = {-1, -1};
    if (!free_state) {
      if (shape_.ping_pong) kept_[static_cast<size_t>(slot)] = pp;
      continue;
    }
    std::array<int32_t, 3> release = {slot, -1, -1};
    size_t count = 1;
    for (int k = 0; k < 2 && shape_.ping_pong; ++k) {
      if (k != keep) release[count++] = pp[static_cast<size_t>(k)];
    }
    KVPOOL_RETURN_IF_ERROR(free(release.data(), count));
  }
  return Status::ok();
}

void MambaPool::clear() {
  slots_.clear();
  std::fill(row_slot_.begin(), row_slot_.end(), -1);
  std::fill(ping_pong_.begin(), ping_pong_.end(), std::array<int32_t, 2>{-1, -1});
  std::fill(kept_.begin(), kept_.end(), std::array<int32_t, 2>{-1, -1});
  backend_->zero(conv_.data(), conv_.bytes());
  backend_->zero(ssm_.data(), ssm_.bytes());
}

size_t MambaPool::check(std::string* report, size_t max_lines, const alloc::IdAllocator& rows) const {
  size_t problems = slots_.check(report, max_lines);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::map<int32_t, size_t> users;
  for (size_t row = 1; row < row_slot_.size(); ++row) {
    const int32_t slot = row_slot_[row];
    if (slot < 0) continue;
    if (!rows.owned(static_cast<int64_t>(row))) complain("free row " + std::to_string(row) + " still maps to mamba slot " + std::to_string(slot));
    std::vector<int32_t> held = {slot};
    if (shape_.ping_pong) held.insert(held.end(), ping_pong_[row].begin(), ping_pong_[row].end());
    for (int32_t s : held) {
      if (!slots_.owned(s)) complain("row " + std::to_string(row) + " maps to free mamba slot " + std::to_string(s));
      if (users[s]++ > 0) complain("mamba slot " + std::to_string(s) + " is double-owned by two rows");
    }
  }
  return problems;
}

}  // namespace kvp::mamba
