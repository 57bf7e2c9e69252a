# Unbounded capacity, concurrency 1, page 16 on the whole bundled trace: the reference
# numbers of examples/data/README.md.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
run_replay(json --trace ${TRACE} --capacity-tokens unbounded --page-size 16 --concurrency 1 --policy lru --json)
message(STATUS "${json}")
expect_field("${json}" requests 3993)
expect_field("${json}" blocks 121877)
expect_field("${json}" input_tokens 61194628)
expect_field("${json}" matched_tokens 39850800)
expect_raw("${json}" token_hit_ratio 0.651214)
expect_field("${json}" evicted_tokens 0)
expect_field("${json}" retractions 0)
expect_field("${json}" oom_skipped 0)
expect_field("${json}" check ok)
# 64.0% of blocks: 77,953 of 121,877 = 121,877 - 43,924 distinct ids, the hash-id
# ceiling of the trace's README (docs/replay.md defines the block metric).
expect_field("${json}" hit_blocks 77953)
expect_raw("${json}" block_hit_ratio 0.639604)
string(JSON hits GET "${json}" hit_blocks)
string(JSON blocks GET "${json}" blocks)
math(EXPR permille "(${hits} * 1000 + ${blocks} / 2) / ${blocks}")
if(NOT permille EQUAL 640)
  message(FATAL_ERROR "block hit ratio rounds to ${permille} per mille, expected 640")
endif()
foreach(key wall_seconds peak_used_tokens ops_per_second)
  string(JSON value GET "${json}" ${key})   # present
endforeach()
