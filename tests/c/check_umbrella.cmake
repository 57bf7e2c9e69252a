# c.umbrella: <kvpool/kvpool.h> is the one header users include, so it must
# include every public header (and the strict C89/C99/C11/C++ header builds,
# which compile kvpool.h, then cover them all).
#   cmake -DINCLUDE_DIR=<src>/include -P check_umbrella.cmake
file(READ "${INCLUDE_DIR}/kvpool/kvpool.h" _umbrella)
file(GLOB _headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/kvpool/*.h")
set(_missing)
foreach(_h IN LISTS _headers)
  if(NOT _h STREQUAL "kvpool/kvpool.h" AND NOT _umbrella MATCHES "#include [\"<]${_h}[\">]")
    list(APPEND _missing ${_h})
  endif()
endforeach()
if(_missing)
  list(JOIN _missing ", " _missing)
  message(FATAL_ERROR "kvpool/kvpool.h does not include: ${_missing}")
endif()
list(LENGTH _headers _n)
message(STATUS "kvpool/kvpool.h includes all ${_n} public headers")
