# Installs cora from the build tree, then configures, builds and runs an external project
# that uses find_package(cora CONFIG): links cora::cora (JIT) and builds an AOT library with
# cora_add_library, used from plain C. Then installs that project (cora_install_library) and runs
# the installed C program against the installed library.
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

# Install the consumer: the generated library and header (cora_install_library) and the C program.
set(consumer_prefix ${WORK_DIR}/consumer-install)
step(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${consumer_prefix})
load_cache(${WORK_DIR}/build READ_WITH_PREFIX consumer_ CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
foreach(file ${consumer_CMAKE_INSTALL_LIBDIR}/libragged_scale.so ${consumer_CMAKE_INSTALL_INCLUDEDIR}/ragged_scale.h
             ${consumer_CMAKE_INSTALL_BINDIR}/aot_consumer)
  if(NOT EXISTS ${consumer_prefix}/${file})
    message(FATAL_ERROR "cora_install_library / install: ${consumer_prefix}/${file} is missing")
  endif()
endforeach()
step(${consumer_prefix}/${consumer_CMAKE_INSTALL_BINDIR}/aot_consumer)
