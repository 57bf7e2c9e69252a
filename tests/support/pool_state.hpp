// A text picture of everything a pool shows through its public API, for the
// tests that must prove "a failed call changed nothing": the fuzz targets, the
// failure-injection tests and the soak. Two captures of an unchanged pool are
// equal; a capture after a failed call must equal the one before it.
//
// What it covers: the allocator's lists (order included), availability, sizes
// and byte counts, the request table's free rows and the rows it is told about,
// the prefix tree's sizes, the accounting identity, and every request it is told
// about (info, slots, state slot). Counters that a failed call is meant to bump
// (alloc_failures, rejected_calls, ...) are left out on purpose.
//
// Header-only and free of GoogleTest, so libFuzzer targets can include it.
#pragma once

#include <charconv>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvpool/kvpool.h"

namespace kvtest {

struct PoolStateOptions {
  std::vector<uint64_t> seqs;  // kvseq ids to describe (unknown ids are described by their status)
  std::vector<int32_t> rows;   // request-table rows to read in full
  size_t row_len = 0;          // tokens per row read (max_context_len)
};

namespace detail {

// A plain string builder. The fuzz targets take a picture after almost every
// call, and std::ostringstream's locale-aware formatting was about a sixth of
// an execution; integers go through std::to_chars instead.
class Text {
 public:
  Text& operator<<(const char* s) {
    s_ += s;
    return *this;
  }
  Text& operator<<(const std::string& s) {
    s_ += s;
    return *this;
  }
  Text& operator<<(char c) {
    s_ += c;
    return *this;
  }
  template <class T, std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>, int> = 0>
  Text& operator<<(T v) {
    if constexpr (std::is_enum_v<T>) {
      return *this << static_cast<std::underlying_type_t<T>>(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      s_ += v ? '1' : '0';
    } else {
      char digits[24];
      const auto end = std::to_chars(digits, digits + sizeof(digits), v).ptr;
      s_.append(digits, end);
    }
    return *this;
  }
  std::string str() && { return std::move(s_); }

 private:
  std::string s_;
};

inline void put_list(Text& out, const kvpool* pool, int32_t list, const char* name) {
  // One call in the common case: a size query first would fail with BUFFER_TOO_SMALL and
  // format an error message every time, which showed up in the fuzz targets' profiles.
  thread_local std::vector<int64_t> ids(256);
  size_t len = 0;
  kvpool_status st = kvalloc_free_list(pool, list, ids.data(), ids.size(), &len);
  if (st == KVPOOL_ERR_BUFFER_TOO_SMALL) {
    ids.resize(len + 1);
    st = kvalloc_free_list(pool, list, ids.data(), ids.size(), &len);
  }
  if (st != KVPOOL_OK && st != KVPOOL_ERR_BUFFER_TOO_SMALL) {
    out << name << ": status " << st << "\n";
    return;
  }
  out << name << " (" << len << "):";
  if (st == KVPOOL_OK) {
    for (size_t i = 0; i < len; ++i) out << ' ' << ids[i];
  } else {
    out << " status " << st;
  }
  out << "\n";
}

template <class... Sizes>
inline void put_sizes(Text& out, const char* name, kvpool_status st, Sizes... sizes) {
  out << name << ":";
  if (st != KVPOOL_OK) {
    out << " status " << st << "\n";
    return;
  }
  ((out << ' ' << sizes), ...);
  out << "\n";
}

}  // namespace detail

// The pool's public state as text, one fact per line (so a diff names what changed).
inline std::string pool_state(const kvpool* pool, const PoolStateOptions& opts = {}) {
  detail::Text out;
  kvpool_stats s = KVPOOL_STATS_INIT;
  if (kvpool_get_stats(pool, &s) != KVPOOL_OK) return "not a live pool\n";
  out << "tokens: capacity " << s.token_capacity << " available " << s.token_available << " held " << s.token_held
      << " pending " << s.token_pending << "\n";
  out << "swa: capacity " << s.swa_capacity << " available " << s.swa_available << " held " << s.swa_held << "\n";
  out << "requests: capacity " << s.req_capacity << " available " << s.req_available << "\n";
  out << "mamba: capacity " << s.mamba_capacity << " available " << s.mamba_available << "\n";
  out << "bytes: kv " << s.kv_bytes << " req " << s.req_table_bytes << " mamba " << s.mamba_bytes << "\n";

  detail::put_list(out, pool, KVALLOC_LIST_FREE, "free");
  detail::put_list(out, pool, KVALLOC_LIST_RELEASE, "release");
  if (s.alloc_kind == KVALLOC_SWA) {
    detail::put_list(out, pool, KVALLOC_LIST_SWA_FREE, "swa free");
    detail::put_list(out, pool, KVALLOC_LIST_SWA_RELEASE, "swa release");
  }

  size_t a = 0, b = 0, c = 0, d = 0, e = 0;
  // Each status is taken before the sizes are read (argument order is unspecified).
  kvpool_status st = radix_sizes(pool, &a, &b, &c);
  detail::put_sizes(out, "radix", st, a, b, c);
  st = radix_state_sizes(pool, &a, &b);
  detail::put_sizes(out, "radix states", st, a, b);
  st = kvseq_accounting(pool, &a, &b, &c, &d, &e);
  detail::put_sizes(out, "accounting", st, a, b, c, d, e);

  for (uint64_t seq : opts.seqs) {
    kvseq_info info = KVSEQ_INFO_INIT;
    st = kvseq_get_info(pool, seq, &info);
    out << "seq " << seq << ":";
    if (st != KVPOOL_OK) {
      out << " status " << st << "\n";
      continue;
    }
    out << " row " << info.row << " tokens " << info.tokens << " computed " << info.computed << " cached "
        << info.cached << " hit " << info.prefix_hit;
    size_t n = 0;
    std::vector<int64_t> slots(info.computed + 1);
    st = kvseq_get_slots(pool, seq, slots.data(), slots.size(), &n);
    out << " slots";
    if (st == KVPOOL_OK) {
      for (size_t i = 0; i < n; ++i) out << ' ' << slots[i];
    } else {
      out << " status " << st;
    }
    int32_t state = -1;
    if (kvseq_mamba_slot(pool, seq, &state) == KVPOOL_OK) out << " state " << state;
    out << "\n";
  }
  if (opts.row_len > 0) {
    std::vector<int64_t> row(opts.row_len);
    for (int32_t r : opts.rows) {
      out << "row " << r << ":";
      if (kvreq_read(pool, r, 0, row.data(), row.size()) != KVPOOL_OK) {
        out << " unreadable\n";
        continue;
      }
      for (int64_t v : row) out << ' ' << v;
      out << "\n";
    }
  }
  return std::move(out).str();
}

// The picture with the given kvseq requests described.
inline std::string pool_state(const kvpool* pool, const std::vector<uint64_t>& seqs) {
  PoolStateOptions opts;
  opts.seqs = seqs;
  return pool_state(pool, opts);
}

// The first line where two pictures differ, for failure messages ("" when equal).
inline std::string first_difference(const std::string& before, const std::string& after) {
  if (before == after) return "";
  std::istringstream x(before), y(after);
  std::string lx, ly;
  while (true) {
    const bool gx = static_cast<bool>(std::getline(x, lx));
    const bool gy = static_cast<bool>(std::getline(y, ly));
    if (!gx && !gy) return "(same lines, different text)";
    if (lx != ly || gx != gy) return "before: " + (gx ? lx : "<end>") + "\nafter:  " + (gy ? ly : "<end>");
  }
}

}  // namespace kvtest
