# The host tier (--host-capacity-tokens) of kvpool-replay, under each write policy with
# kvpool_check every 20 steps: hits split into device and host parts that add up to the
# matched tokens; host hits (for every policy that must get them); at least as many
# tokens loaded as host hits; bytes each way match the copied tokens. VARIANT picks the
# pool and what else is asserted:
#   mha (default; -DOUT=dir): the trace's tiny mha model at page 16, 300 requests, a 60k
#     device pool and a 3M host tier: also the reported capacities, the number of checks,
#     load evictions among evictions, the per-request file's two columns adding up, host
#     hits for write_through_selective too; then greedy admission (retractions load host
#     hits back), a device-only run that reports no host figures and matches fewer tokens,
#     and a sweep with the with-host curve.
#   hybrid (-DCONFIG=examples/configs/tiny-cpu-hybrid.json): a hybrid_linear pool (one
#     full-attention layer of 1 head x 4 f16 values, page_size 1; the full-attention KV is
#     tiered, mamba states stay on the device), 150 requests on a 40k device pool with
#     chunked prefill (--chunk 512 caches a state at every chunk boundary, so later prompts
#     can continue from one); write_through_selective may get no host hits.
#   swa (-DCONFIG=examples/configs/tiny-cpu-swa.json): a swa pool (one window layer and one
#     full-attention layer of 1 head x 4 f16 values, a 64-token window, page_size 1; the
#     full-attention rows of every token and the window rows of window tails are tiered), 80
#     requests on a 40k device pool with --chunk 512, kvpool_check every 50 steps;
#     write_through_selective may get no host hits. The bytes each way cover the copied
#     tokens' full-layer rows, plus window rows (a whole number of them, at most one per
#     token) on top, and host hits load window rows back.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
if(NOT DEFINED VARIANT)
  set(VARIANT mha)
endif()
if(VARIANT STREQUAL "hybrid")
  set(common --trace ${TRACE} --config ${CONFIG} --max-requests 150 --capacity-tokens 40k --concurrency 4
             --chunk 512 --check-every 20 --host-capacity-tokens 3M --json)
  set(bytes_per_token 16)  # K and V of 4 f16 values, one full-attention layer
  set(may_miss_host write_through_selective)  # the one policy that may get no host hits
  set(device_pool 40k)
elseif(VARIANT STREQUAL "swa")
  set(common --trace ${TRACE} --config ${CONFIG} --max-requests 80 --capacity-tokens 40k --concurrency 4
             --chunk 512 --check-every 50 --host-capacity-tokens 3M --json)
  set(bytes_per_token 16)  # K and V of 4 f16 values, one layer
  set(may_miss_host write_through_selective)
  set(device_pool 40k)
elseif(VARIANT STREQUAL "mha")
  file(MAKE_DIRECTORY ${OUT})
  set(common --trace ${TRACE} --max-requests 300 --capacity-tokens 60k --page-size 16 --concurrency 4
             --check-every 20 --json)
  # The tiny model: 1 layer x K and V x 1 head x 1 element x 2 bytes (f16).
  set(bytes_per_token 4)
  set(may_miss_host "")
  set(device_pool 60k)
else()
  message(FATAL_ERROR "VARIANT is \"${VARIANT}\": expected mha, hybrid or swa")
endif()

# The mha variant's own checks of one policy's run.
function(check_mha_run policy json per_request)
  expect_field("${json}" capacity_tokens 60000)
  string(JSON host_cap GET "${json}" host_capacity_tokens)
  if(host_cap LESS 3000000)
    message(FATAL_ERROR "${policy}: host_capacity_tokens ${host_cap}, expected at least 3000000")
  endif()
  string(JSON steps GET "${json}" steps)
  string(JSON checks GET "${json}" checks)
  math(EXPR expected "${steps} / 20 + 1")
  if(NOT checks EQUAL expected)
    message(FATAL_ERROR "${policy}: ${checks} kvpool_check calls, expected ${expected}")
  endif()
  foreach(key matched_tokens host_hit_tokens evicted_tokens load_evicted_tokens)
    string(JSON ${key} GET "${json}" ${key})
  endforeach()
  if(load_evicted_tokens GREATER evicted_tokens)
    message(FATAL_ERROR "${policy}: load_evicted_tokens ${load_evicted_tokens} > evicted_tokens ${evicted_tokens}")
  endif()
  # --per-request: "matched host_hit" per request, adding up to the totals.
  file(STRINGS ${per_request} lines)
  list(LENGTH lines n)
  if(NOT n EQUAL 300)
    message(FATAL_ERROR "${policy}: ${n} lines in ${per_request}, expected 300")
  endif()
  set(total_matched 0)
  set(total_host 0)
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^([0-9]+) ([0-9]+)$")
      message(FATAL_ERROR "${policy}: per-request line \"${line}\" is not \"matched host_hit\"")
    endif()
    math(EXPR total_matched "${total_matched} + ${CMAKE_MATCH_1}")
    math(EXPR total_host "${total_host} + ${CMAKE_MATCH_2}")
  endforeach()
  if(NOT total_matched EQUAL matched_tokens OR NOT total_host EQUAL host_hit_tokens)
    message(FATAL_ERROR "${policy}: per-request sums ${total_matched} / ${total_host}, JSON ${matched_tokens} / ${host_hit_tokens}")
  endif()
endfunction()

# The swa variant's bytes each way (a macro: it reads the run's fields from the loop): the
# full-layer rows of every copied token, window rows (a whole number of them, at most one per
# token) on top, and window rows loaded back whenever there were host hits.
macro(check_swa_bytes policy)
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
endmacro()

foreach(policy write_through write_through_selective write_back)
  set(per_request ${OUT}/per_request_${policy}.txt)
  if(VARIANT STREQUAL "mha")
    run_replay(json ${common} --host-capacity-tokens 3M --host-write-policy ${policy} --per-request ${per_request})
  else()
    run_replay(json ${common} --host-write-policy ${policy})
  endif()
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
  if(NOT policy STREQUAL "${may_miss_host}" AND host_hit_tokens EQUAL 0)
    message(FATAL_ERROR "${policy}: no host hits with a ${device_pool} device pool and a 3M host tier")
  endif()
  # First admissions are among all load-backs (retractions and re-begins load too).
  if(host_load_tokens LESS host_hit_tokens)
    message(FATAL_ERROR "${policy}: ${host_load_tokens} tokens loaded, fewer than the ${host_hit_tokens} host hits")
  endif()
  if(VARIANT STREQUAL "swa")
    check_swa_bytes(${policy})
  else()
    math(EXPR want_to_device "${host_load_tokens} * ${bytes_per_token}")
    math(EXPR want_to_host "${host_backup_tokens} * ${bytes_per_token}")
    if(NOT bytes_to_device EQUAL want_to_device OR NOT bytes_to_host EQUAL want_to_host OR bytes_to_host EQUAL 0)
      message(FATAL_ERROR "${policy}: bytes to host ${bytes_to_host} (want ${want_to_host}), to device "
                          "${bytes_to_device} (want ${want_to_device})")
    endif()
  endif()
  if(VARIANT STREQUAL "mha")
    check_mha_run(${policy} "${json}" ${per_request})
  endif()
  set(matched_${policy} ${matched_tokens})
endforeach()
if(NOT VARIANT STREQUAL "mha")
  return()
endif()

# Greedy admission, 8 at once: retractions, whose re-match loads host hits back too.
run_replay(json --trace ${TRACE} --max-requests 300 --capacity-tokens 60k --page-size 16 --concurrency 8
           --admission greedy --check-every 20 --host-capacity-tokens 3M --json)
expect_field("${json}" check ok)
foreach(key matched_tokens device_hit_tokens host_hit_tokens retractions)
  string(JSON ${key} GET "${json}" ${key})
endforeach()
math(EXPR sum "${device_hit_tokens} + ${host_hit_tokens}")
if(NOT sum EQUAL matched_tokens OR retractions EQUAL 0 OR host_hit_tokens EQUAL 0)
  message(FATAL_ERROR "greedy: device ${device_hit_tokens} + host ${host_hit_tokens} vs matched ${matched_tokens}, "
                      "${retractions} retractions")
endif()

# The same replay without the tier: one column, no host figures, and the host tier adds hits.
run_replay(json ${common} --per-request ${OUT}/per_request_device.txt)
expect_field("${json}" host_tier OFF)
expect_field("${json}" host_hit_tokens 0)
expect_field("${json}" bytes_to_host 0)
expect_field("${json}" bytes_to_device 0)
string(JSON matched GET "${json}" matched_tokens)
expect_field("${json}" device_hit_tokens ${matched})
file(STRINGS ${OUT}/per_request_device.txt lines)
list(GET lines 0 first)
if(NOT first MATCHES "^[0-9]+$")
  message(FATAL_ERROR "device-only per-request line \"${first}\" is not one number")
endif()
message(STATUS "matched tokens: device only ${matched}, with the host tier ${matched_write_through}")
if(NOT matched_write_through GREATER matched)
  message(FATAL_ERROR "the host tier matched ${matched_write_through} tokens, not more than ${matched} without it")
endif()

# --sweep with the tier: a second run at each capacity below it, CSV rows for both, and the
# with-host curve in the SVG.
file(REMOVE_RECURSE ${OUT}/sweep)
run_replay(json --trace ${TRACE} --max-requests 300 --page-size 16 --concurrency 4 --sweep 60k,200k,4M
           --host-capacity-tokens 3M --out ${OUT}/sweep --json)
string(JSON runs LENGTH "${json}" sweep)
if(NOT runs EQUAL 6)
  message(FATAL_ERROR "expected 6 runs (60k, 60k+host, 200k, 200k+host, 4M, unbounded), got ${runs}")
endif()
foreach(pair "0;OFF" "1;ON" "2;OFF" "3;ON" "4;OFF" "5;OFF")
  list(GET pair 0 i)
  list(GET pair 1 want)
  string(JSON run GET "${json}" sweep ${i})
  expect_field("${run}" host_tier ${want})
  expect_field("${run}" check ok)
endforeach()
foreach(pair "0;1" "2;3")
  list(GET pair 0 dev)
  list(GET pair 1 host)
  string(JSON a GET "${json}" sweep ${dev} matched_tokens)
  string(JSON b GET "${json}" sweep ${host} matched_tokens)
  string(JSON ca GET "${json}" sweep ${dev} capacity_tokens)
  string(JSON cb GET "${json}" sweep ${host} capacity_tokens)
  if(NOT ca EQUAL cb OR NOT b GREATER a)
    message(FATAL_ERROR "sweep: capacity ${ca}: ${a} matched tokens; with the host tier (capacity ${cb}): ${b}")
  endif()
endforeach()
file(STRINGS ${OUT}/sweep/sweep.csv rows)
list(LENGTH rows n)
if(NOT n EQUAL 7)
  message(FATAL_ERROR "sweep.csv: ${n} lines, expected a header and 6 rows")
endif()
list(GET rows 0 header)
if(NOT header MATCHES ",host_capacity_tokens,device_hit_tokens,host_hit_tokens,bytes_to_host,bytes_to_device$")
  message(FATAL_ERROR "sweep.csv header: ${header}")
endif()
expect_well_formed_svg(${OUT}/sweep/sweep.svg)
file(READ ${OUT}/sweep/sweep.svg svg)
string(FIND "${svg}" "host tier of 3M tokens" at)
if(at LESS 0)
  message(FATAL_ERROR "sweep.svg has no with-host-tier curve")
endif()
