// Ops of the request API (kvseq_*): plausible batches built from the live
// requests' lengths, and wrong ids, lengths and arrays.
#include <algorithm>
#include <climits>

#include "api_fuzz_driver.hpp"

namespace kvfuzz {

namespace {
constexpr kvpool_status INV = KVPOOL_ERR_INVALID_ARGUMENT;
constexpr kvpool_status OOM = KVPOOL_ERR_OUT_OF_MEMORY;
constexpr kvpool_status UNS = KVPOOL_ERR_UNSUPPORTED;
constexpr kvpool_status BTS = KVPOOL_ERR_BUFFER_TOO_SMALL;
constexpr size_t kMaxLive = 8;

kvseq_info info_of(const kvpool* pool, uint64_t seq) {
  kvseq_info info = KVSEQ_INFO_INIT;
  if (kvseq_get_info(pool, seq, &info) != KVPOOL_OK) info.row = -2;  // unknown (a wrong id)
  return info;
}
}  // namespace

void Driver::seq_begin() {
  std::vector<int32_t> t = tokens(context_);
  const bool wrong = in_.chance(12);
  if (!wrong && (seqs_.size() >= kMaxLive || t.empty())) return;
  if (wrong) {
    if (in_.chance(2)) t.assign(context_ + 1, 3);  // longer than a row
    else t.clear();
  }
  uint64_t seq = 0;
  size_t cached = 0;
  const char* key = extra_key();
  const int32_t* arg = !t.empty() && in_.chance(32) ? nullptr : t.data();
  if (call("kvseq_begin", {INV, OOM, UNS}, true, [&] {
        return kvseq_begin(pool_, arg, t.size(), key, in_.chance(48) ? nullptr : &seq, &cached);
      }) == KVPOOL_OK) {
    if (seq == 0 || cached >= t.size()) fail("kvseq_begin", "id 0 or the whole prompt reported cached");
    seqs_.push_back(seq);
  }
}

void Driver::seq_extend() {
  std::vector<uint64_t> batch;
  std::vector<int64_t> chunks;
  for (uint64_t s : seqs_) {
    const kvseq_info i = info_of(pool_, s);
    if (i.computed < i.tokens && in_.chance(2)) {
      batch.push_back(s);
      chunks.push_back(1 + static_cast<int64_t>(in_.below(static_cast<size_t>(i.tokens - i.computed))));
    }
  }
  if (in_.chance(6)) {
    switch (in_.below(5)) {
      case 0: batch.push_back(wrong_seq()); chunks.push_back(1); break;
      case 1:
        if (!batch.empty()) { batch.push_back(batch[0]); chunks.push_back(1); }  // listed twice
        break;
      case 2:
        if (!chunks.empty()) chunks[0] = in_.chance(2) ? 0 : static_cast<int64_t>(context_) + 1;
        break;
      case 3:
        if (!chunks.empty()) chunks[0] = in_.chance(2) ? -1 : INT64_MAX;
        break;
      default:
        if (!seqs_.empty()) {  // a request whose prompt is done, or not yet begun prefill: chunk past the prompt
          batch.push_back(seqs_[in_.below(seqs_.size())]);
          chunks.push_back(static_cast<int64_t>(context_));
        }
        break;
    }
  }
  if (batch.empty()) return;
  int64_t total = 0;
  for (int64_t c : chunks) total += std::max<int64_t>(0, std::min<int64_t>(c, 1 << 12));
  size_t slots_len = static_cast<size_t>(std::min<int64_t>(total, 1 << 12));
  size_t chunks_len = chunks.size();
  if (in_.chance(24)) (in_.chance(2) ? slots_len : chunks_len) += 1;
  chunks.resize(chunks_len + 1, 1);
  std::vector<int64_t> slots(slots_len + 1, -7);
  call("kvseq_extend", {INV, OOM}, true, [&] {
    return kvseq_extend(pool_, in_.chance(48) ? nullptr : batch.data(), batch.size(), chunks.data(), chunks_len,
                        slots.data(), slots_len);
  });
}

void Driver::seq_decode() {
  std::vector<uint64_t> batch;
  for (uint64_t s : seqs_) {
    const kvseq_info i = info_of(pool_, s);
    if (i.computed == i.tokens && i.row >= 0 && in_.chance(2)) batch.push_back(s);
  }
  if (in_.chance(6)) {
    if (!seqs_.empty() && in_.chance(2)) {
      batch.push_back(seqs_[in_.below(seqs_.size())]);  // maybe mid-prefill, maybe listed twice
    } else {
      batch.push_back(wrong_seq());
    }
  }
  if (batch.empty()) return;
  std::vector<int32_t> toks(batch.size() + 1);
  for (auto& t : toks) t = static_cast<int32_t>(in_.below(3)) + 7;
  size_t tokens_len = batch.size(), slots_len = batch.size();
  if (in_.chance(24)) (in_.chance(2) ? tokens_len : slots_len) += 1;
  std::vector<int64_t> slots(slots_len + 1, -7);
  call("kvseq_decode", {INV, OOM}, true, [&] {
    return kvseq_decode(pool_, batch.data(), batch.size(), toks.data(), tokens_len,
                        in_.chance(48) ? nullptr : slots.data(), slots_len);
  });
}

void Driver::seq_finish_abort() {
  const bool wrong = seqs_.empty() || in_.chance(8);
  const size_t k = wrong ? 0 : in_.below(seqs_.size());
  const uint64_t seq = wrong ? wrong_seq() : seqs_[k];
  const kvseq_info i = info_of(pool_, seq);
  kvpool_status st;
  if (in_.chance(4)) {
    st = call("kvseq_abort", {INV}, true, [&] { return kvseq_abort(pool_, seq); });
  } else {
    size_t committed = static_cast<size_t>(i.computed);
    if (committed > 0 && in_.chance(3)) committed -= 1 + in_.below(committed);
    if (in_.chance(12)) committed = static_cast<size_t>(i.computed) + 1 + in_.below(2);  // more than computed
    st = call("kvseq_finish", {INV}, true, [&] { return kvseq_finish(pool_, seq, committed); });
  }
  if (st == KVPOOL_OK) {
    if (wrong) fail("kvseq_finish/abort", "accepted an id that is not a live request");
    seqs_.erase(seqs_.begin() + static_cast<long>(k));
    if (dead_.size() < 16) dead_.push_back(seq);
  }
}

void Driver::seq_retract() {
  const bool wrong = seqs_.empty() || in_.chance(8);
  const uint64_t seq = wrong ? wrong_seq() : seqs_[in_.below(seqs_.size())];
  size_t cached = 0;
  if (call("kvseq_retract", {INV}, true, [&] {
        return kvseq_retract(pool_, seq, in_.chance(48) ? nullptr : &cached);
      }) == KVPOOL_OK && wrong) {
    fail("kvseq_retract", "accepted an id that is not a live request");
  }
}

void Driver::seq_query() {
  const uint64_t seq = !seqs_.empty() && !in_.chance(6) ? seqs_[in_.below(seqs_.size())] : wrong_seq();
  kvseq_info info = KVSEQ_INFO_INIT;
  if (in_.chance(32)) info.struct_size = 8;  // an older, smaller struct than the library's
  call("kvseq_get_info", {INV}, false, [&] { return kvseq_get_info(pool_, seq, &info); });
  std::vector<int64_t> slots(in_.below(48));
  size_t len = 0;
  call("kvseq_get_slots", {INV, BTS}, false, [&] {
    return kvseq_get_slots(pool_, seq, slots.empty() ? nullptr : slots.data(), slots.size(), &len);
  });
  int32_t state = -1;
  call("kvseq_mamba_slot", {INV, UNS}, false, [&] { return kvseq_mamba_slot(pool_, seq, &state); });
  size_t a = 0, b = 0, c = 0, d = 0, e = 0;
  call("kvseq_accounting", {INV}, false, [&] {
    return kvseq_accounting(pool_, &a, &b, in_.chance(32) ? nullptr : &c, &d, &e);
  });
}

}  // namespace kvfuzz
