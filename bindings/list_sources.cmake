# Writes the files matching PATTERN in DIR into OUT, one per line, as an
# argument file for javac (@file) or mcs (@file): the names of SWIG's
# generated sources are only known after swig has run.
# Usage: cmake -DDIR=<folder> -DPATTERN=*.java -DOUT=<file> -P list_sources.cmake
file(GLOB _sources "${DIR}/${PATTERN}")
if(NOT _sources)
  message(FATAL_ERROR "no ${PATTERN} in ${DIR}: did swig run?")
endif()
list(SORT _sources)
list(JOIN _sources "\n" _text)
file(WRITE "${OUT}" "${_text}\n")
