// extern "C" entry points of check.h: the ownership self-check and statistics.
#include <cstring>

#include "capi/api_util.hpp"
#include "capi/device_alloc_api.hpp"
#include "capi/device_mirror.hpp"
#include "kvpool/alloc.h"
#include "kvpool/check.h"

using kvp::Status;
using kvp::capi::check_out;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

constexpr size_t kMaxReportLines = 64;

// Runs every component's check; returns the number of problems.
size_t check_all(const kvpool* p, std::string* report) {
  size_t problems = 0;
  auto left = [&] { return problems < kMaxReportLines ? kMaxReportLines - problems : 0; };
  if (p->swa) {
    problems += p->swa->check(report, left());
  } else {
    problems += p->paged->pages().check(report, left());
  }
  problems += p->requests->row_ids().check(report, left());
  if (p->mamba) problems += p->mamba->check(report, left(), p->requests->row_ids());
  if (p->cache) problems += p->cache->check(report, left());
  if (p->mamba_cache) problems += p->mamba_cache->check(report, left());
  if (p->swa_cache) problems += p->swa_cache->check(report, left());
  if (p->seqs) problems += p->seqs->check(report, left());
  // When only kvseq_* allocated, every held page (slot, window slot, state) belongs to a request or a tree node.
  if (p->seqs && !p->direct_allocations) problems += p->seqs->check_attribution(report, left());
  return problems;
}

std::string summary(const kvpool* p) {
  std::string s = "ok: ";
  if (p->swa) {
    s += std::to_string(p->swa->full().held()) + " slots and " + std::to_string(p->swa->swa().held()) +
         " window slots held";
  } else if (p->device_pages) {
    s += std::to_string(kvp::capi::held_pages(p)) + " " + p->device_pages->what() + "s held, " +
         std::to_string(kvp::capi::available_pages(p)) + " free (device free list)";
  } else {
    s += std::to_string(p->paged->pages().held()) + " " + p->paged->pages().what() + "s held, " +
         std::to_string(p->paged->pages().available()) + " free";
  }
  s += ", " + std::to_string(p->requests->row_ids().held()) + " rows held";
  if (p->mamba) s += ", " + std::to_string(p->mamba->ids().held()) + " mamba slots held";
  if (p->cache) s += ", " + std::to_string(p->cache->tree().total_size()) + " tokens cached";
  if (p->mamba_cache) {
    s += ", " + std::to_string(p->mamba_cache->tree().full_evictable_size() + p->mamba_cache->tree().full_protected_size()) +
         " tokens and " +
         std::to_string(p->mamba_cache->tree().mamba_evictable_size() + p->mamba_cache->tree().mamba_protected_size()) +
         " states cached";
  }
  if (p->swa_cache) {
    s += ", " + std::to_string(p->swa_cache->tree().full_evictable_size() + p->swa_cache->tree().full_protected_size()) +
         " tokens (" + std::to_string(p->swa_cache->tree().swa_evictable_size() + p->swa_cache->tree().swa_protected_size()) +
         " with window KV) cached";
  }
  if (p->seqs) s += ", " + std::to_string(p->seqs->active()) + " requests";
  return s;
}

void copy_report(const std::string& text, char* report, size_t cap) {
  if (report == nullptr || cap == 0) return;
  const size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
  std::memcpy(report, text.data(), n);
  report[n] = '\0';
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvpool_check(const kvpool* pool, char* report, size_t report_cap) {
  return with_pool<Access::kSharedOnHostList>("kvpool_check", pool, [&](kvpool* p) -> Status {
    if (report == nullptr && report_cap > 0) return Status::invalid("report is NULL but report_cap is not 0");
    std::string text;
    size_t device_problems = 0;  // a device free list: downloaded and checked first
    if (p->device_pages) {  // the host mirror and the device lists must agree first
      KVPOOL_RETURN_IF_ERROR(kvp::capi::sync_lists(p));
      KVPOOL_RETURN_IF_ERROR(kvp::capi::device_check(p, &text, kMaxReportLines, &device_problems));
    }
    const size_t problems = device_problems + check_all(p, &text);
    if (problems == 0) {
      if (report != nullptr && report_cap > 0) copy_report(summary(p), report, report_cap);  // no summary nobody reads
      return Status::ok();
    }
    if (problems > kMaxReportLines) text += "... " + std::to_string(problems - kMaxReportLines) + " more\n";
    copy_report(text, report, report_cap);
    return Status(KVPOOL_ERR_CHECK_FAILED, std::to_string(problems) + " problem(s):\n" + text);
  });
}

KVPOOL_API kvpool_status kvpool_get_stats(const kvpool* pool, kvpool_stats* out) {
  return with_pool<Access::kShared>("kvpool_get_stats", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
    if (out->struct_size < sizeof(kvpool_stats)) {
      return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                             std::to_string(sizeof(kvpool_stats)) + " (use KVPOOL_STATS_INIT)");
    }
    kvpool_stats s = KVPOOL_STATS_INIT;
    if (p->swa) {
      s.alloc_kind = KVALLOC_SWA;
      const auto& full = p->swa->full();
      const auto& swa = p->swa->swa();
      s.token_capacity = static_cast<uint64_t>(full.num_ids());
      s.token_available = full.available();
      s.token_held = full.held();
      s.token_pending = full.pending();
      s.swa_capacity = static_cast<uint64_t>(swa.num_ids());
      s.swa_available = swa.available();
      s.swa_held = swa.held();
    } else {
      const auto& pages = p->paged->pages();
      const uint64_t page = static_cast<uint64_t>(p->paged->page_size());
      s.alloc_kind = page == 1 ? KVALLOC_TOKEN : KVALLOC_PAGED;
      s.token_capacity = static_cast<uint64_t>(pages.num_ids()) * page;
      s.token_available = pages.available() * page;
      s.token_held = pages.held() * page;
      s.token_pending = pages.pending() * page;
      if (p->device_pages) {  // whichever copy of the lists is current
        s.token_available = kvp::capi::available_pages(p) * page;
        s.token_held = kvp::capi::held_pages(p) * page;
      }
    }
    s.req_capacity = static_cast<uint64_t>(p->requests->row_ids().num_ids());
    s.req_available = p->requests->available();
    if (p->mamba) {
      s.mamba_capacity = static_cast<uint64_t>(p->mamba->ids().num_ids());
      s.mamba_available = p->mamba->ids().available();
      s.mamba_bytes = p->mamba->bytes();
    }
    s.kv_bytes = p->kv->bytes();
    s.req_table_bytes = p->requests->memory().bytes();
    s.alloc_calls = p->counters.alloc_calls;
    s.free_calls = p->counters.free_calls;
    s.alloc_failures = p->counters.alloc_failures;
    s.rejected_calls = p->counters.rejected_calls;
    const uint32_t caller_size = out->struct_size;
    std::memcpy(out, &s, sizeof(s));
    out->struct_size = caller_size;
    return Status::ok();
  });
}

}  // extern "C"
