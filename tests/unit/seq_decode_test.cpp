// kvseq_decode's refusals: every way a batch can fail its checks names the same request
// with the same status and message whatever its position, in a fixed order (an unknown
// id anywhere, then a repeat, then per request: tokens not computed, a full row), and
// changes nothing. kvseq checks a batch in one pass and words a refusal only afterwards,
// so these tests pin the order and the messages of that second step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "seq_test_util.hpp"

namespace {

using kvtest::Pool;
using kvtest::range;
using kvtest::seq_begin;
using kvtest::seq_decode;
using kvtest::seq_extend;
using kvtest::Slots;
using kvtest::Tokens;

// page 4, 64 tokens of context: a request reaches a full row after a few decodes.
std::string config(int page, const char* cache = "radix") {
  return R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": 512, "max_running_requests": 8, "max_context_len": 16},
         "prefix_cache": {"kind": ")" + cache + R"("}})";
}

// A decode that must fail with `status` and `message`, leaving the pool's public state
// (free lists, accounting, every request's row, tokens and slots, the rows) as it was.
void expect_refused(kvpool* pool, const std::vector<uint64_t>& live, const std::vector<int32_t>& rows,
                    const std::vector<uint64_t>& batch, kvpool_status status, const std::string& message) {
  kvtest::PoolStateOptions opts;
  opts.seqs = live;
  opts.rows = rows;
  opts.row_len = 16;
  const std::string before = kvtest::pool_state(pool, opts);
  Slots out;
  EXPECT_EQ(seq_decode(pool, batch, Tokens(batch.size(), 7), &out), status);
  EXPECT_EQ(std::string(kvpool_last_error()), "kvseq_decode: " + message);
  const std::string after = kvtest::pool_state(pool, opts);
  EXPECT_EQ(after, before) << kvtest::first_difference(before, after);
  kvtest::expect_consistent(pool);
}

class KvseqDecodeRefusal : public ::testing::TestWithParam<int> {};

TEST_P(KvseqDecodeRefusal, SameMessageInCheckOrderAndNothingChanges) {
  Pool pool(config(GetParam()));
  // a, b: prefilled and decoding; fresh: begun, never extended (no row); full: at max_context_len.
  const uint64_t a = seq_begin(pool, range(100, 5)), b = seq_begin(pool, range(200, 7));
  const uint64_t full = seq_begin(pool, range(300, 15));
  ASSERT_EQ(seq_extend(pool, {a, b, full}, {5, 7, 15}), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(seq_decode(pool, {full}, {1}), KVPOOL_OK) << kvpool_last_error();  // 16 tokens: its row is full
  const uint64_t fresh = seq_begin(pool, range(400, 3));
  const uint64_t unknown = 999;
  const std::vector<uint64_t> live = {a, b, full, fresh};
  std::vector<int32_t> rows;
  for (uint64_t id : {a, b, full}) rows.push_back(kvtest::seq_info(pool, id).row);

  const auto missing = [](uint64_t id) {
    return "request " + std::to_string(id) + " does not exist (finished, aborted or never begun)";
  };
  const auto twice = [](uint64_t id) { return "request " + std::to_string(id) + " appears twice in the batch"; };
  const std::string not_computed = "request " + std::to_string(fresh) + ": has 3 tokens not computed yet; extend it before decoding";
  const std::string too_long = "request " + std::to_string(full) + ": would exceed max_context_len 16";

  // An unknown id comes first wherever it stands, before repeats and per-request failures.
  expect_refused(pool, live, rows, {a, b, unknown}, KVPOOL_ERR_INVALID_ARGUMENT, missing(unknown));
  expect_refused(pool, live, rows, {fresh, full, a, a, unknown}, KVPOOL_ERR_INVALID_ARGUMENT, missing(unknown));
  expect_refused(pool, live, rows, {a, 0, b}, KVPOOL_ERR_INVALID_ARGUMENT, missing(0));
  // Then a repeat (the smallest repeated id), before the per-request checks.
  expect_refused(pool, live, rows, {full, b, a, b, a}, KVPOOL_ERR_INVALID_ARGUMENT, twice(std::min(a, b)));
  expect_refused(pool, live, rows, {fresh, a, fresh}, KVPOOL_ERR_INVALID_ARGUMENT, twice(fresh));
  // Then the first request, in batch order, that cannot decode.
  expect_refused(pool, live, rows, {a, fresh, full}, KVPOOL_ERR_INVALID_ARGUMENT, not_computed);
  expect_refused(pool, live, rows, {b, full, fresh}, KVPOOL_ERR_INVALID_ARGUMENT, too_long);
  expect_refused(pool, live, rows, {full}, KVPOOL_ERR_INVALID_ARGUMENT, too_long);

  // The refusals left the batch stamps consistent: the same requests decode together now.
  Slots out;
  ASSERT_EQ(seq_decode(pool, {b, a}, {1, 2}, &out), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_slots(pool, a).back(), out[1]);
  EXPECT_EQ(kvtest::seq_slots(pool, b).back(), out[0]);
  kvtest::expect_consistent(pool);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, KvseqDecodeRefusal, ::testing::Values(1, 4));

// kvseq_decode appends as it walks the batch and takes the appends back when a later
// request fails: a refusal after requests that started a page, continued one, or grew
// their full buffers mid-batch leaves every request, table cell and free page as before.
TEST_P(KvseqDecodeRefusal, LateRefusalTakesBackEveryEarlierAppend) {
  Pool pool(config(GetParam()));
  // a: 5 tokens, decoded to 9 (its buffers, reserved at begin for 9, are then full);
  // b: 8 tokens (its next token starts a page at page 1, 2, 4 and 8); c: 6 tokens.
  const uint64_t a = seq_begin(pool, range(100, 5)), b = seq_begin(pool, range(200, 8));
  const uint64_t c = seq_begin(pool, range(300, 6));
  ASSERT_EQ(seq_extend(pool, {a, b, c}, {5, 8, 6}), KVPOOL_OK) << kvpool_last_error();
  for (int32_t t = 0; t < 4; ++t) ASSERT_EQ(seq_decode(pool, {a}, {t}), KVPOOL_OK) << kvpool_last_error();
  const uint64_t fresh = seq_begin(pool, range(400, 3));  // no row: cannot decode
  std::vector<int32_t> rows;
  for (uint64_t id : {a, b, c}) rows.push_back(kvtest::seq_info(pool, id).row);
  const std::string not_computed = "request " + std::to_string(fresh) + ": has 3 tokens not computed yet; extend it before decoding";
  expect_refused(pool, {a, b, c, fresh}, rows, {b, a, c, fresh}, KVPOOL_ERR_INVALID_ARGUMENT, not_computed);
  expect_refused(pool, {a, b, c, fresh}, rows, {c, b, a, c}, KVPOOL_ERR_INVALID_ARGUMENT,
                 "request " + std::to_string(c) + " appears twice in the batch");
  expect_refused(pool, {a, b, c, fresh}, rows, {a, b, c, 77}, KVPOOL_ERR_INVALID_ARGUMENT,
                 "request 77 does not exist (finished, aborted or never begun)");
  // The same batch without the refused request decodes, a's buffers growing on the way.
  Slots out;
  ASSERT_EQ(seq_decode(pool, {b, a, c}, {1, 2, 3}, &out), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_slots(pool, b).back(), out[0]);
  EXPECT_EQ(kvtest::seq_slots(pool, a).size(), 10u);
  EXPECT_EQ(kvtest::seq_slots(pool, a).back(), out[1]);
  EXPECT_EQ(kvtest::seq_slots(pool, c).back(), out[2]);
  kvtest::expect_consistent(pool);
}

// A request whose tokens all came from the tree has every slot but no row yet: it must be
// extended (by nothing new: SGLang recomputes its last token) before it decodes.
TEST(KvseqDecode, FullyCachedRequestWithoutRowIsRefused) {
  Pool pool(config(4));
  const uint64_t first = seq_begin(pool, range(10, 8));
  ASSERT_EQ(seq_extend(pool, {first}, {8}), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvseq_finish(pool, first, 8), KVPOOL_OK) << kvpool_last_error();
  size_t cached = 0;
  const uint64_t again = seq_begin(pool, range(10, 8), &cached);
  const kvseq_info info = kvtest::seq_info(pool, again);
  ASSERT_EQ(info.row, -1);
  const std::string message = "request " + std::to_string(again) + ": has " +
                              std::to_string(info.tokens - info.computed) +
                              " tokens not computed yet; extend it before decoding";
  expect_refused(pool, {again}, {}, {again}, KVPOOL_ERR_INVALID_ARGUMENT, message);
}

// Every decoded slot continues its request's last page or starts the next free page, for
// every page size and position in the page, across steps that start pages for some
// requests and not others (the page test per request is a mask of the length).
TEST(KvseqDecode, SlotsContinueTheLastPageOrTakeTheNextFreePage) {
  for (int page : {1, 2, 4, 8}) {
    Pool pool(config(page, "none"));
    std::vector<uint64_t> ids;
    for (int32_t len : {1, 2, 3, 5}) {
      ids.push_back(seq_begin(pool, range(len * 10, len)));
      ASSERT_EQ(seq_extend(pool, {ids.back()}, {len}), KVPOOL_OK) << kvpool_last_error();
    }
    for (int step = 0; step < 9; ++step) {
      std::vector<Slots> before;
      for (uint64_t id : ids) before.push_back(kvtest::seq_slots(pool, id));
      Slots out;
      ASSERT_EQ(seq_decode(pool, ids, Tokens(ids.size(), step), &out), KVPOOL_OK) << kvpool_last_error();
      for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t last = before[i].back();
        if (before[i].size() % static_cast<size_t>(page) != 0) {
          EXPECT_EQ(out[i], last + 1) << "page " << page << " step " << step << " request " << i;
        } else {
          EXPECT_EQ(out[i] % page, 0) << "page " << page << " step " << step << " request " << i;
          EXPECT_NE(out[i] / page, last / page);
        }
        EXPECT_EQ(kvtest::seq_slots(pool, ids[i]).back(), out[i]);
        int64_t cell = -1;
        ASSERT_EQ(kvreq_read(pool, kvtest::seq_info(pool, ids[i]).row, before[i].size(), &cell, 1), KVPOOL_OK);
        EXPECT_EQ(cell, out[i]);
      }
      kvtest::expect_consistent(pool);
    }
  }
}

}  // namespace
