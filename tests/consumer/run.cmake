# Installs cora from the build tree, then configures, builds and runs an external project
# that uses find_package(cora CONFIG): links cora::cora (JIT) and builds an AOT library with
# cora_add_library, used from plain C.
foreach(var SOURCE_DIR BUILD_DIR WORK_DIR CORA_CACHE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/install)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# The consumer uses the compiler cora was built with (a sanitized cora needs its sanitizer runtime).
set(compiler_arg)
if(DEFINED CXX_COMPILER)
  set(compiler_arg -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  if(CXX_COMPILER MATCHES "clang\\+\\+")
    string(REGEX REPLACE "clang\\+\\+" "clang" c_compiler "${CXX_COMPILER}")
    list(APPEND compiler_arg -DCMAKE_C_COMPILER=${c_compiler})
  endif()
endif()
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/project -B ${WORK_DIR}/build
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${compiler_arg})
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${CMAKE_COMMAND} -E env CORA_CACHE_DIR=${CORA_CACHE_DIR} ${WORK_DIR}/build/consumer)
step(${WORK_DIR}/build/aot_consumer)
