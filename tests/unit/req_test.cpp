// Request rows: SGLANG_SEMANTICS §1.1 and the request-table helpers of §1.14 / §8.2.
#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Rows = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

Rows alloc_rows(kvpool* pool, size_t n) {
  Rows rows(n);
  EXPECT_EQ(kvreq_alloc(pool, rows.data(), n), KVPOOL_OK) << kvpool_last_error();
  return rows;
}

size_t rows_available(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvreq_available(pool, &n), KVPOOL_OK);
  return n;
}

Slots read_row(kvpool* pool, int32_t row, size_t start, size_t n) {
  Slots out(n, -7);
  EXPECT_EQ(kvreq_read(pool, row, start, out.data(), n), KVPOOL_OK) << kvpool_last_error();
  return out;
}

TEST(RequestRows, RowZeroIsReservedAndReuseIsFifo) {
  Pool pool(kvtest::mha_config(1, 64, "none", 4));
  EXPECT_EQ(rows_available(pool), 4u);
  EXPECT_EQ(alloc_rows(pool, 3), (Rows{1, 2, 3}));
  Rows r{2};
  ASSERT_EQ(kvreq_free(pool, r.data(), 1), KVPOOL_OK);
  EXPECT_EQ(alloc_rows(pool, 2), (Rows{4, 2}));  // freed rows go to the back
  Rows out(1);
  EXPECT_EQ(kvreq_alloc(pool, out.data(), 1), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(rows_available(pool), 0u);
  ASSERT_EQ(kvreq_alloc(pool, nullptr, 0), KVPOOL_OK);
  ASSERT_EQ(kvreq_clear(pool), KVPOOL_OK);
  EXPECT_EQ(rows_available(pool), 4u);
  kvtest::expect_consistent(pool);
}

TEST(RequestRows, PdDecodeHasPreAllocatedRows) {
  Pool pool(kvtest::mha_config(1, 64, "decode", 4));
  EXPECT_EQ(rows_available(pool), 4u + 8u);
}

TEST(RequestRows, WriteReadAndBadRows) {
  Pool pool(kvtest::mha_config(4, 64, "none", 4, 16));
  Rows rows = alloc_rows(pool, 2);
  Slots slots{4, 5, 6, 7, 12};
  ASSERT_EQ(kvreq_write(pool, rows[1], 3, slots.data(), slots.size()), KVPOOL_OK);
  EXPECT_EQ(read_row(pool, rows[1], 3, 5), slots);
  EXPECT_EQ(read_row(pool, rows[1], 0, 3), (Slots{0, 0, 0}));  // the table starts zeroed
  EXPECT_EQ(kvreq_write(pool, 0, 0, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);  // reserved
  EXPECT_EQ(kvreq_write(pool, 3, 0, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);  // not allocated
  EXPECT_EQ(kvreq_write(pool, 99, 0, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_write(pool, rows[0], 12, slots.data(), 5), KVPOOL_ERR_INVALID_ARGUMENT);  // past column 16
  Slots bad{4, 68};
  EXPECT_EQ(kvreq_write(pool, rows[0], 0, bad.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);  // slot >= 64 + 4
  EXPECT_NE(std::string(kvpool_last_error()).find("slot 68"), std::string::npos);
  EXPECT_EQ(read_row(pool, rows[0], 0, 2), (Slots{0, 0}));  // failed writes wrote nothing
  Slots out(2);
  EXPECT_EQ(kvreq_read(pool, rows[0], 15, out.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_read(nullptr, rows[0], 0, out.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);
  Rows twice{rows[0], rows[0]};
  EXPECT_EQ(kvreq_free(pool, twice.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);
  Rows zero{0};
  EXPECT_EQ(kvreq_free(pool, zero.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_free(pool, nullptr, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_available(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rows_available(pool), 2u);
  kvtest::expect_consistent(pool);
}

// Found by the API fuzzer (UBSan): an empty write or read, such as the cached-prefix write of a
// request's first extend when nothing was cached, passed an empty vector's NULL data to memcpy.
// Without the fix this fails only in a build with -DKVPOOL_SANITIZE=undefined.
TEST(RequestRows, EmptyWriteAndReadCopyNothing) {
  Pool pool(kvtest::mha_config(1, 32));
  const Rows rows = alloc_rows(pool, 1);
  EXPECT_EQ(kvreq_write(pool, rows[0], 3, nullptr, 0), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvreq_read(pool, rows[0], 3, nullptr, 0), KVPOOL_OK) << kvpool_last_error();
  const int32_t token = 5;
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, &token, 1, nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
  const int64_t chunk = 1;
  int64_t slot = -1;
  EXPECT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, &slot, 1), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
  kvtest::expect_consistent(pool);
}

TEST(RequestRows, WriteBatchAndLastLoc) {
  Pool pool(kvtest::mha_config(4, 64, "none", 4, 16));
  Rows rows = alloc_rows(pool, 3);
  // Request 0: prefix 4 + 2 new; request 1: no prefix, 3 new; request 2: prefix 2, nothing new.
  Slots pre{4, 0, 2}, seq{6, 3, 2}, prefix_slots{8, 9, 10, 11, 20, 21}, extend_slots{12, 13, 24, 25, 26};
  ASSERT_EQ(kvreq_write_batch(pool, rows.data(), 3, pre.data(), 3, seq.data(), 3, prefix_slots.data(), 6,
                              extend_slots.data(), 5),
            KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(read_row(pool, rows[0], 0, 6), (Slots{8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(read_row(pool, rows[1], 0, 3), (Slots{24, 25, 26}));
  EXPECT_EQ(read_row(pool, rows[2], 0, 2), (Slots{20, 21}));

  Slots last(3, -7);
  Slots lens{6, 0, 2};
  ASSERT_EQ(kvreq_last_loc(pool, rows.data(), 3, lens.data(), 3, last.data(), 3), KVPOOL_OK);
  EXPECT_EQ(last, (Slots{13, -1, 21}));
  Slots full_len{16};
  ASSERT_EQ(kvreq_last_loc(pool, rows.data(), 1, full_len.data(), 1, last.data(), 1), KVPOOL_OK);  // = context length
  Slots too_long{17};
  EXPECT_EQ(kvreq_last_loc(pool, rows.data(), 1, too_long.data(), 1, last.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_last_loc(pool, rows.data(), 3, lens.data(), 2, last.data(), 3), KVPOOL_ERR_INVALID_ARGUMENT);

  // A bad batch writes nothing: wrong totals, seq < prefix, a free row.
  Slots wrong_total{1, 2, 3};
  EXPECT_EQ(kvreq_write_batch(pool, rows.data(), 3, pre.data(), 3, seq.data(), 3, wrong_total.data(), 3,
                              extend_slots.data(), 5),
            KVPOOL_ERR_INVALID_ARGUMENT);
  Slots backwards{4, 0, 3};
  EXPECT_EQ(kvreq_write_batch(pool, rows.data(), 3, backwards.data(), 3, seq.data(), 3, prefix_slots.data(), 7,
                              extend_slots.data(), 4),
            KVPOOL_ERR_INVALID_ARGUMENT);
  Rows with_free{rows[0], 4};
  EXPECT_EQ(kvreq_write_batch(pool, with_free.data(), 2, pre.data(), 2, seq.data(), 2, prefix_slots.data(), 4,
                              extend_slots.data(), 5),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(read_row(pool, rows[0], 0, 6), (Slots{8, 9, 10, 11, 12, 13}));
}

}  // namespace
