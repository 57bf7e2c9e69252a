# The storage tier (--storage file:DIR): a device pool and a host tier both far smaller
# than the working set, so that pages the host tier evicted come back from storage.
# Hits split into device, host and storage parts that add up to the matched tokens; the
# storage part is not 0 and adds to what the same run without storage matched; nothing
# read is rejected; a second run on the same directory starts cold (the replay clears it);
# write-through and write-back run clean with kvpool_check every 20 steps.
include(${CMAKE_CURRENT_LIST_DIR}/run_replay.cmake)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(common --trace ${TRACE} --max-requests 120 --capacity-tokens 40k --host-capacity-tokens 100k --page-size 64 --prompts-only
           --concurrency 4 --check-every 20 --json)

run_replay(base ${common})
string(JSON base_matched GET "${base}" matched_tokens)
expect_field("${base}" storage OFF)

foreach(policy write_through write_back)
  set(rounds 1 2)
  if(policy STREQUAL write_back)
    set(rounds 1)  # the second round (a cleared store) is the same code for every policy
  endif()
  foreach(round ${rounds})
    run_replay(json ${common} --host-write-policy ${policy} --storage file:${OUT}/store)
    message(STATUS "${policy} (${round}): ${json}")
    expect_field("${json}" check ok)
    expect_field("${json}" storage ON)
    foreach(key matched_tokens device_hit_tokens host_hit_tokens storage_hit_tokens storage_backup_pages
                storage_bytes_written storage_prefetch_tokens storage_pages_rejected storage_failures)
      string(JSON ${key} GET "${json}" ${key})
    endforeach()
    # The store's fault counters are reported, and a healthy directory has none.
    foreach(key storage_put_errors storage_get_errors storage_timeouts storage_server_errors storage_servers_ejected)
      expect_field("${json}" ${key} 0)
    endforeach()
    math(EXPR sum "${device_hit_tokens} + ${host_hit_tokens} + ${storage_hit_tokens}")
    if(NOT sum EQUAL matched_tokens)
      message(FATAL_ERROR "${policy}: device ${device_hit_tokens} + host ${host_hit_tokens} + storage "
                          "${storage_hit_tokens} != matched ${matched_tokens}")
    endif()
    if(storage_hit_tokens EQUAL 0 OR storage_backup_pages EQUAL 0 OR storage_bytes_written EQUAL 0)
      message(FATAL_ERROR "${policy}: no storage hits or backups (${storage_hit_tokens}, ${storage_backup_pages})")
    endif()
    if(storage_prefetch_tokens LESS storage_hit_tokens)
      message(FATAL_ERROR "${policy}: ${storage_prefetch_tokens} tokens prefetched < ${storage_hit_tokens} storage hits")
    endif()
    if(NOT storage_pages_rejected EQUAL 0 OR NOT storage_failures EQUAL 0)
      message(FATAL_ERROR "${policy}: ${storage_pages_rejected} pages rejected, ${storage_failures} failures")
    endif()
    if(matched_tokens LESS base_matched)
      message(FATAL_ERROR "${policy}: ${matched_tokens} matched with storage < ${base_matched} without")
    endif()
    # The replay clears the store at the start of a run: the second round matches what the first did.
    if(round EQUAL 1)
      set(first ${matched_tokens})
    elseif(NOT matched_tokens EQUAL first)
      message(FATAL_ERROR "${policy}: round 2 matched ${matched_tokens}, round 1 ${first} (the store was not cleared?)")
    endif()
  endforeach()
endforeach()

# --storage with a --config whose storage section names the same backend keeps its other keys
# (a prefetch threshold no request reaches: nothing is prefetched) and replaces the location;
# a section of another backend is replaced whole (its memcached keys would not parse for file).
set(tiny "\"model\": {\"name\": \"replay-tiny\", \"num_layers\": 1, \"attention\": \"mha\", \"kv_heads\": 1, \"head_dim\": 1}, \"pool\": {\"device\": \"cpu\", \"kv_dtype\": \"f16\"}, \"prefix_cache\": {\"kind\": \"radix\"}")
file(WRITE ${OUT}/same.json "{${tiny}, \"storage\": {\"backend\": \"file\", \"path\": \"${OUT}/unused\", \"prefetch_threshold_tokens\": 100000000}}")
file(WRITE ${OUT}/other.json "{${tiny}, \"storage\": {\"backend\": \"memcached\", \"servers\": [\"127.0.0.1:1\"], \"timeout_ms\": 5}}")
set(short --trace ${TRACE} --max-requests 40 --capacity-tokens 40k --host-capacity-tokens 100k --page-size 64 --prompts-only
          --concurrency 4 --json --storage file:${OUT}/store)
run_replay(json --config ${OUT}/same.json ${short})
expect_field("${json}" storage_prefetches 0)
string(JSON pages GET "${json}" storage_backup_pages)
if(pages EQUAL 0 OR EXISTS ${OUT}/unused)
  message(FATAL_ERROR "--storage with the config's file section: ${pages} pages backed up, or the config's path was used")
endif()
run_replay(json --config ${OUT}/other.json ${short})
string(JSON prefetches GET "${json}" storage_prefetches)
if(prefetches EQUAL 0)
  message(FATAL_ERROR "--storage file: over a memcached section: no prefetches (${json})")
endif()

# --storage without a host tier, and a malformed spec: usage errors.
execute_process(COMMAND ${EXE} --trace ${TRACE} --max-requests 5 --capacity-tokens 40k --storage file:${OUT}/x --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "needs a host tier")
  message(FATAL_ERROR "--storage without a host tier: rc ${rc}, stderr ${err}")
endif()
execute_process(COMMAND ${EXE} --trace ${TRACE} --storage s3:bucket RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--storage must be")
  message(FATAL_ERROR "--storage s3:bucket: rc ${rc}, stderr ${err}")
endif()
file(REMOVE_RECURSE ${OUT})
