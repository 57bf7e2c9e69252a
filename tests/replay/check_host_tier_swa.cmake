# The host tier on a swa pool (examples/configs/tiny-cpu-swa.json: one window layer and one
# full-attention layer of 1 head x 4 f16 values, a 64-token window, page_size 1): the
# full-attention rows of every token and the window rows of window tails are tiered. Under
# each write policy: kvpool_check every 50 steps; hits split by tier add up; write_through
# and write_back get host hits; the bytes each way cover the copied tokens' full-layer rows,
# plus window rows of at most a window per copied or loaded token run.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
set(common --trace ${TRACE} --config ${CONFIG} --max-requests 80 --capacity-tokens 40k --concurrency 4
           --chunk 512 --check-every 50 --host-capacity-tokens 3M --json)
set(bytes_per_token 16)  # K and V of 4 f16 values, one layer

foreach(policy write_through write_through_selective write_back)
  run_replay(json ${common} --host-write-policy ${policy})
  message(STATUS "${policy}: ${json}")
  expect_field("${json}" check ok)
  expect_field("${json}" host_tier ON)
  expect_field("${json}" host_write_policy ${policy})
  foreach(key matched_tokens device_hit_tokens host_hit_tokens bytes_to_host bytes_to_device host_backup_tokens
              host_load_tokens)
    string(JSON ${key} GET "${json}" ${key})
  endforeach()
  math(EXPR sum "${device_hit_tokens} + ${host_hit_tokens}")
  if(NOT sum EQUAL matched_tokens)
    message(FATAL_ERROR "${policy}: device ${device_hit_tokens} + host ${host_hit_tokens} != matched ${matched_tokens}")
  endif()
  if(NOT policy STREQUAL "write_through_selective" AND host_hit_tokens EQUAL 0)
    message(FATAL_ERROR "${policy}: no host hits with a 40k device pool and a 3M host tier")
  endif()
  if(host_load_tokens LESS host_hit_tokens)
    message(FATAL_ERROR "${policy}: ${host_load_tokens} tokens loaded, fewer than the ${host_hit_tokens} host hits")
  endif()
  # Full-layer rows of every token each way, window rows (a whole number of them, at most one
  # per token) on top.
  math(EXPR full_to_device "${host_load_tokens} * ${bytes_per_token}")
  math(EXPR full_to_host "${host_backup_tokens} * ${bytes_per_token}")
  math(EXPR window_to_device "${bytes_to_device} - ${full_to_device}")
  math(EXPR window_to_host "${bytes_to_host} - ${full_to_host}")
  math(EXPR odd_device "${window_to_device} % ${bytes_per_token}")
  math(EXPR odd_host "${window_to_host} % ${bytes_per_token}")
  if(window_to_device LESS 0 OR window_to_host LESS 0 OR window_to_device GREATER full_to_device OR
     window_to_host GREATER full_to_host OR NOT odd_device EQUAL 0 OR NOT odd_host EQUAL 0 OR bytes_to_host EQUAL 0)
    message(FATAL_ERROR "${policy}: bytes to host ${bytes_to_host} (full-layer rows ${full_to_host}), to device "
                        "${bytes_to_device} (full-layer rows ${full_to_device})")
  endif()
  if(host_hit_tokens GREATER 0 AND window_to_device EQUAL 0)
    message(FATAL_ERROR "${policy}: host hits without window rows loaded back")
  endif()
endforeach()
