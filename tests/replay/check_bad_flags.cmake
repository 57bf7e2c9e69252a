# Every command-line mistake prints the usage text on stderr and exits with 2.
# One case per element, its arguments separated by "|".
set(cases
  "--trace|${TRACE}|--bogus"
  "--capacity-tokens|1000"
  "--trace|${TRACE}|--capacity-tokens|lots"
  "--trace|${TRACE}|--capacity-tokens|0"
  "--trace|${TRACE}|--page-size|12"
  "--trace|${TRACE}|--policy|random"
  "--trace|${TRACE}|--concurrency|0"
  "--trace|${TRACE}|--sweep|1M,,2M"
  "--trace|${TRACE}|--sweep|1M|--capacity-tokens|2M"
  "--trace|${TRACE}|--admission|eager"
  "--trace|${TRACE}|--chunk"
  "--trace|${TRACE}|--evict-rule|lazy"
  "--trace|${TRACE}|--evict-rule"
  "--trace|${TRACE}|--sweep|1M|--per-request|${OUT}/x.txt"
  "--trace|${TRACE}|--capacity-tokens|1M|--host-capacity-tokens|1M"
  "--trace|${TRACE}|--capacity-tokens|1M|--host-capacity-tokens|500k"
  "--trace|${TRACE}|--host-capacity-tokens|10M"
  "--trace|${TRACE}|--capacity-tokens|unbounded|--host-capacity-tokens|10M"
  "--trace|${TRACE}|--capacity-tokens|1M|--host-capacity-tokens|lots"
  "--trace|${TRACE}|--capacity-tokens|1k|--host-capacity-tokens|2M"
  "--trace|${TRACE}|--capacity-tokens|1M|--host-capacity-tokens|2M|--host-write-policy|sometimes"
  "--trace|${TRACE}|--capacity-tokens|1M|--host-write-policy|write_back"
  "--trace|${TRACE}|--sweep|1M,2M|--host-capacity-tokens|500k"
  "--trace|${TRACE}|--instances|0"
  "--trace|${TRACE}|--instances|two"
  "--trace|${TRACE}|--instances|-1"
  "--trace|${TRACE}|--instances|3|--sweep|1M,2M"
  "--trace|${TRACE}|--stop-at|0"
  "--trace|${TRACE}|--stop-at|20,10"
  "--trace|${TRACE}|--stop-at|10,10"
  "--trace|${TRACE}|--stop-at|10,"
  "--trace|${TRACE}|--stop-at|ten"
  "--trace|${TRACE}|--stop-at|1,2,3,4,5,6,7,8,9"
  "--trace")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" args "${case}")
  string(REPLACE "|" " " shown "${case}")
  execute_process(COMMAND ${EXE} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "kvpool-replay ${shown}: exit ${rc}, expected 2\n${out}${err}")
  endif()
  if(NOT err MATCHES "usage: ")
    message(FATAL_ERROR "kvpool-replay ${shown}: no usage message on stderr:\n${err}")
  endif()
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "kvpool-replay ${shown}: printed to stdout:\n${out}")
  endif()
endforeach()
# --help is not an error.
execute_process(COMMAND ${EXE} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: ")
  message(FATAL_ERROR "--help: exit ${rc}\n${out}")
endif()
# A missing trace file is a failure (1), not a usage error.
execute_process(COMMAND ${EXE} --trace ${OUT}/no-such-trace.jsonl RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "missing trace: exit ${rc}, expected 1\n${err}")
endif()
