// The device-array operations of device.h: the same checks as the host calls
// (shared through Impl::check_*), then one job for the kernels in
// cuda/kv_kernels.cu. Slot values live in device memory and are checked there.
#include <string>
#include <vector>

#include "pool/descriptor.hpp"
#include "pool/kv_buffers_impl.hpp"

namespace kvp::pool {

using config::DType;

namespace {

dev::Codec codec_of(Wide w) {
  switch (w) {
    case Wide::kF32: return dev::Codec::kF32;
    case Wide::kF16: return dev::Codec::kF16;
    case Wide::kBF16: return dev::Codec::kBF16;
  }
  return dev::Codec::kF32;
}

dev::Codec codec_of(DType d) {
  switch (d) {
    case DType::kF32: return dev::Codec::kF32;
    case DType::kF16: return dev::Codec::kF16;
    case DType::kBF16: return dev::Codec::kBF16;
    case DType::kFP8E4M3: return dev::Codec::kE4M3;
    case DType::kFP8E5M2: return dev::Codec::kE5M2;
    case DType::kFP4E2M1: return dev::Codec::kFP4;
  }
  return dev::Codec::kBF16;
}

// Kernels read caller values with their natural width.
Status check_aligned(const void* p, size_t width, const char* name) {
  if (reinterpret_cast<uintptr_t>(p) % width == 0) return Status::ok();
  return Status::invalid(std::string(name) + " is not aligned to its " + std::to_string(width) +
                         "-byte values");
}

Status no_window(const LayerKv& l) {
  if (!l.window) return Status::ok();
  return Status::unsupported("layer " + std::to_string(l.layer) +
                             " is a sliding-window layer, whose rows are found through the host-side window "
                             "mapping; use the host calls (kvpool_set_kv, kvpool_get_kv) for it");
}

// A part covering a whole stored row (K or V) of `values` (+ fp4 `scales`).
dev::RowPart whole_row(const KvLayout& L, const RowBuffer& values, const RowBuffer& scales, const void* user,
                       float divisor) {
  dev::RowPart p;
  p.user = const_cast<void*>(user);
  p.values = values.data();
  p.value_stride = values.row_bytes;
  p.scales = scales.present() ? scales.data() : nullptr;
  p.scale_stride = scales.row_bytes;
  p.elements = L.elements;
  p.row_bytes = L.value_bytes;
  p.divisor = divisor;
  return p;
}

dev::RowJob kv_job(const KvLayout& L, const int64_t* slots, size_t n, dev::Codec user) {
  dev::RowJob job;
  job.slots = slots;
  job.n = n;
  job.slot_limit = L.slot_limit();
  job.user = user;
  job.stored = codec_of(L.kv_dtype);
  job.parts = L.mha_like() ? 2 : 1;
  return job;
}

}  // namespace

Status KvBuffers::set_kv_async(int32_t layer, const int64_t* slots, size_t n, const void* k, size_t k_bytes,
                               const void* v, size_t v_bytes, int32_t src_dtype, float k_scale, float v_scale,
                               void* stream, const dev::FaultSink& fault) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  WriteFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_set_kv(layer, n, k_bytes, v, v_bytes, src_dtype, k_scale, v_scale, &l, &f));
  KVPOOL_RETURN_IF_ERROR(no_window(*l));
  KVPOOL_RETURN_IF_ERROR(check_aligned(k, f.value_bytes, "k"));
  KVPOOL_RETURN_IF_ERROR(check_aligned(v, f.value_bytes, "v"));
  dev::RowJob job = kv_job(L, slots, n, f.raw ? dev::Codec::kRaw : codec_of(f.wide));
  job.part[0] = whole_row(L, l->k, l->k_scale, k, k_scale);
  if (L.mha_like()) job.part[1] = whole_row(L, l->v, l->v_scale, v, v_scale);
  return dev::encode_rows(job, stream, fault);
}

Status KvBuffers::set_mla_kv_async(int32_t layer, const int64_t* slots, size_t n, const void* nope,
                                   size_t nope_bytes, const void* rope, size_t rope_bytes, int32_t src_dtype,
                                   void* stream, const dev::FaultSink& fault) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  WriteFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_set_mla_kv(layer, n, nope_bytes, rope_bytes, src_dtype, &l, &f));
  KVPOOL_RETURN_IF_ERROR(check_aligned(nope, f.value_bytes, "nope"));
  KVPOOL_RETURN_IF_ERROR(check_aligned(rope, f.value_bytes, "rope"));
  if (L.form == RowForm::kNsaPacked) {
    dev::NsaJob job;
    job.slots = slots;
    job.n = n;
    job.slot_limit = L.slot_limit();
    job.user = codec_of(f.wide);
    job.nope = nope;
    job.rope = rope;
    job.rows = l->k.data();
    job.row_stride = l->k.row_bytes;
    job.lora = L.lora;
    job.rope_dim = L.rope;
    return dev::encode_nsa(job, stream, fault);
  }
  const bool fp4 = L.kv_dtype == DType::kFP4E2M1;
  if (fp4 && L.lora % 16 != 0) {
    return Status::unsupported("fp4 blocks straddle the nope/rope boundary (kv_lora_rank " + std::to_string(L.lora) +
                               " is not a multiple of 16); use kvpool_set_mla_kv");
  }
  // nope and rope fill one stored row: two parts at different offsets.
  dev::RowJob job = kv_job(L, slots, n, f.raw ? dev::Codec::kRaw : codec_of(f.wide));
  job.parts = 2;
  const uint64_t stored_nope = fp4 ? L.lora / 2 : L.lora * config::dtype_bytes(L.kv_dtype);
  for (int i = 0; i < 2; ++i) {
    dev::RowPart p = whole_row(L, l->k, l->k_scale, i == 0 ? nope : rope, 1.0f);
    p.elements = i == 0 ? L.lora : L.rope;
    p.row_bytes = p.elements * f.value_bytes;
    p.value_offset = i == 0 ? 0 : stored_nope;
    p.scale_offset = i == 0 || !fp4 ? 0 : L.lora / 16;
    job.part[i] = p;
  }
  return dev::encode_rows(job, stream, fault);
}

Status KvBuffers::get_kv_async(int32_t layer, const int64_t* slots, size_t n, void* k, size_t k_bytes, void* v,
                               size_t v_bytes, int32_t dst_dtype, void* stream, const dev::FaultSink& fault) const {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  ReadFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_get_kv(layer, n, k_bytes, v, v_bytes, dst_dtype, &l, &f));
  KVPOOL_RETURN_IF_ERROR(no_window(*l));
  const size_t width = f.raw ? 1 : wide_bytes(f.wide);
  KVPOOL_RETURN_IF_ERROR(check_aligned(k, width, "k"));
  KVPOOL_RETURN_IF_ERROR(check_aligned(v, width, "v"));
  if (L.form == RowForm::kNsaPacked && !f.raw) {
    dev::NsaJob job;
    job.slots = slots;
    job.n = n;
    job.slot_limit = L.slot_limit();
    job.user = codec_of(f.wide);
    job.out = k;
    job.rows = l->k.data();
    job.row_stride = l->k.row_bytes;
    job.lora = L.lora;
    job.rope_dim = L.rope;
    return dev::decode_nsa(job, stream, fault);
  }
  dev::RowJob job = kv_job(L, slots, n, f.raw ? dev::Codec::kRaw : codec_of(f.wide));
  job.part[0] = whole_row(L, l->k, l->k_scale, k, 1.0f);
  if (L.mha_like()) job.part[1] = whole_row(L, l->v, l->v_scale, v, 1.0f);
  return dev::decode_rows(job, stream, fault);
}

namespace {

// The largest of 16, 8, 4, 2, 1 bytes that divides `base` and `row_bytes`: the access width for its rows.
uint32_t access_word(const void* base, uint64_t row_bytes) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(base) | row_bytes | 16u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

}  // namespace

// The buffers never change: describe them to the kernels once (a blocking copy, at first use only).
Status KvBuffers::Impl::build_move_table() {
  std::vector<dev::MoveBuffer> table;
  uint64_t prefix = 0;
  for (const LayerKv& l : layers) {
    if (!l.has_kv) continue;
    for (const RowBuffer* b : {&l.k, &l.v, &l.k_scale, &l.v_scale, &l.label}) {
      if (!b->present()) continue;
      const uint64_t padded = (b->row_bytes + 15) / 16 * 16;
      table.push_back({b->data(), b->row_bytes, padded, prefix, access_word(b->data(), b->row_bytes)});
      prefix += padded;
    }
  }
  backend::DeviceMemory mem;
  const size_t bytes = table.size() * sizeof(dev::MoveBuffer);
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, bytes, &mem));
  KVPOOL_RETURN_IF_ERROR(backend->from_host(mem.data(), table.data(), bytes));
  // Marks: 4 bytes (writer) + 4 bytes (reader) per slot, then the call's staged word.
  backend::DeviceMemory marks;
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, move_limit() * 8 + 4, &marks));
  move_table = std::move(mem);
  move_marks = std::move(marks);
  move_table_count = table.size();
  move_table_scratch_row = prefix;
  return Status::ok();
}

Status KvBuffers::move_kv_async(const int64_t* dst, const int64_t* src, size_t n, void* stream,
                                const dev::FaultSink& fault) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  if (L.variant == config::Attention::kSWA) {
    return Status::unsupported("move_kv is not available for swa pools (window rows are not slot-indexed)");
  }
  if (n == 0) return Status::ok();
  if (n > 0xFFFFFFFEull) {
    return Status::invalid("move_kv_async moves fewer than 2^32 - 1 pairs per call; got " + std::to_string(n));
  }
  if (!I.move_table.data()) KVPOOL_RETURN_IF_ERROR(I.build_move_table());
  // Staged rows, then one route byte per pair.
  size_t scratch = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, I.move_table_scratch_row + 1, "move_kv scratch", &scratch));
  KVPOOL_RETURN_IF_ERROR(I.ensure_device_scratch(scratch));
  dev::MoveJob job;
  job.dst = dst;
  job.src = src;
  job.n = n;
  job.slot_limit = I.move_limit();
  job.buffers = I.move_table.as<dev::MoveBuffer>();
  job.count = I.move_table_count;
  job.scratch = I.device_scratch.as<uint8_t>();
  job.routes = job.scratch + n * I.move_table_scratch_row;
  auto* marks = I.move_marks.as<uint8_t>();
  job.marks.writer = reinterpret_cast<uint32_t*>(marks);
  job.marks.read = reinterpret_cast<uint32_t*>(marks + job.slot_limit * 4);
  job.marks.staged = reinterpret_cast<uint32_t*>(marks + job.slot_limit * 8);
  return dev::move_rows(job, stream, fault);
}

}  // namespace kvp::pool
