#include <gtest/gtest.h>
#include <string>
#include "kvpool/kvpool.h"
TEST(Status, Placeholder) { EXPECT_STREQ(kvpool_status_string(KVPOOL_OK), "ok"); }
