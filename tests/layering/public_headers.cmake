# ctest layering_public_headers: every header of include/cora compiles on its own with only the
# installed include paths (include/ and prelude/), so the public API includes no internal layer
# (src/<layer>/...) and each header includes what it uses. Run with -DCXX=... -DSOURCE_DIR=...
# -DWORK_DIR=... (where the one-line sources go).
file(GLOB headers ${SOURCE_DIR}/include/cora/*.h)
list(LENGTH headers count)
if(count EQUAL 0)
  message(FATAL_ERROR "no headers found in ${SOURCE_DIR}/include/cora")
endif()
set(failed "")
foreach(header IN LISTS headers)
  get_filename_component(name ${header} NAME)
  set(source ${WORK_DIR}/include_${name}.cpp)
  file(WRITE ${source} "#include <cora/${name}>\n")
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I${SOURCE_DIR}/include
                          -I${SOURCE_DIR}/prelude ${source}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND failed ${name})
    message("${name} does not compile alone:\n${err}")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "public headers that do not compile alone: ${failed}")
endif()
message("all ${count} public headers compile alone")
