# The host tier on a hybrid_linear pool (examples/configs/tiny-cpu-hybrid.json: one
# full-attention layer of 1 head x 4 f16 values, page_size 1): the full-attention KV is
# tiered, mamba states stay on the device. Chunked prefill (--chunk 512) caches a state at
# every chunk boundary, so later prompts can continue from one. Under each write policy:
# kvpool_check every 20 steps; hits split by tier add up; write_through and write_back get
# host hits; bytes each way match the copied tokens.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
set(common --trace ${TRACE} --config ${CONFIG} --max-requests 150 --capacity-tokens 40k --concurrency 4
           --chunk 512 --check-every 20 --host-capacity-tokens 3M --json)
set(bytes_per_token 16)  # K and V of 4 f16 values, one full-attention layer

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
  math(EXPR want_to_device "${host_load_tokens} * ${bytes_per_token}")
  math(EXPR want_to_host "${host_backup_tokens} * ${bytes_per_token}")
  if(NOT bytes_to_device EQUAL want_to_device OR NOT bytes_to_host EQUAL want_to_host OR bytes_to_host EQUAL 0)
    message(FATAL_ERROR "${policy}: bytes to host ${bytes_to_host} (want ${want_to_host}), to device "
                        "${bytes_to_device} (want ${want_to_device})")
  endif()
endforeach()
