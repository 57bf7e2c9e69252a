// Status codes, error messages and version: the parts of the ABI every binding relies on.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "kvpool/kvpool.h"

TEST(Status, ValuesArePinned) {
  // These numbers are ABI: bindings and engines hard-code them.
  EXPECT_EQ(KVPOOL_OK, 0);
  EXPECT_EQ(KVPOOL_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(KVPOOL_ERR_CONFIG, 2);
  EXPECT_EQ(KVPOOL_ERR_OUT_OF_MEMORY, 3);
  EXPECT_EQ(KVPOOL_ERR_CUDA, 4);
  EXPECT_EQ(KVPOOL_ERR_UNSUPPORTED, 5);
  EXPECT_EQ(KVPOOL_ERR_INTERNAL, 6);
  EXPECT_EQ(KVPOOL_ERR_BUFFER_TOO_SMALL, 7);
  EXPECT_EQ(KVPOOL_ERR_IO, 8);
  EXPECT_EQ(KVPOOL_ERR_HOST_MEMORY, 9);
  EXPECT_EQ(KVPOOL_ERR_CHECK_FAILED, 10);
}

TEST(Status, EveryCodeHasItsOwnString) {
  std::set<std::string> seen;
  for (int code = KVPOOL_OK; code <= KVPOOL_ERR_CHECK_FAILED; ++code) {
    const char* s = kvpool_status_string(static_cast<kvpool_status>(code));
    ASSERT_NE(s, nullptr);
    EXPECT_STRNE(s, "unknown status") << code;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate string for " << code;
  }
  EXPECT_STREQ(kvpool_status_string(KVPOOL_OK), "ok");
  EXPECT_STREQ(kvpool_status_string(static_cast<kvpool_status>(999)), "unknown status");
  EXPECT_STREQ(kvpool_status_string(static_cast<kvpool_status>(-1)), "unknown status");
}

TEST(Status, LastErrorIsPerThreadAndKeptAcrossSuccess) {
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create("{", 1, &pool), KVPOOL_ERR_CONFIG);
  const std::string mine = kvpool_last_error();
  EXPECT_NE(mine.find("malformed JSON"), std::string::npos) << mine;

  std::string other;
  std::thread([&] { other = kvpool_last_error(); }).join();
  EXPECT_EQ(other, "") << "another thread must not see this thread's error";

  // A successful call does not clear the message (decide by status, never by message).
  EXPECT_EQ(kvpool_version(), static_cast<uint32_t>(KVPOOL_VERSION_NUMBER));
  EXPECT_EQ(mine, kvpool_last_error());
}

TEST(Version, RuntimeMatchesHeaders) {
  EXPECT_EQ(kvpool_version(), static_cast<uint32_t>(KVPOOL_VERSION_NUMBER));
  EXPECT_STREQ(kvpool_version_string(), KVPOOL_VERSION_STRING);
  const std::string expected = std::to_string(KVPOOL_VERSION_MAJOR) + "." + std::to_string(KVPOOL_VERSION_MINOR) +
                               "." + std::to_string(KVPOOL_VERSION_PATCH);
  EXPECT_EQ(expected, kvpool_version_string());
  EXPECT_EQ(KVPOOL_VERSION_NUMBER, KVPOOL_VERSION_MAJOR * 10000 + KVPOOL_VERSION_MINOR * 100 + KVPOOL_VERSION_PATCH);
}
