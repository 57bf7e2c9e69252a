# --config: the file's model and pool are used, with the replay's needs written over
# them (max_context_len 1024 is too small for the trace; events are switched off);
# --page-size and --policy override the file. Also checks the text report.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
run_replay(json --trace ${TRACE} --config ${CONFIG} --max-requests 50 --capacity-tokens 300k
           --page-size 32 --policy fifo --concurrency 4 --chunk 4096 --json)
message(STATUS "${json}")
expect_field("${json}" page_size 32)
expect_field("${json}" policy fifo)
expect_field("${json}" capacity_tokens 300000)
expect_field("${json}" chunk 4096)
expect_field("${json}" check ok)
run_replay(text --trace ${TRACE} --config ${CONFIG} --max-requests 5 --no-progress)
foreach(line "block hit ratio" "token hit ratio" "evicted tokens" "peak used tokens" "ops/s" "kvpool_check      OK")
  string(FIND "${text}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "the text report lacks \"${line}\":\n${text}")
  endif()
endforeach()
# The file's own capacity (4096 tokens) is kept when no capacity flag is given.
string(FIND "${text}" "capacity          4,096 tokens, page 4" at)
if(at LESS 0)
  message(FATAL_ERROR "expected the config's capacity and page size:\n${text}")
endif()
