# cora_add_library(<name> GENERATOR <generator-target> [GENERATOR_NAME <registered name>]
#                  [FUNCTION_NAME <c function>] [TARGETS <targets>] [PARAMS name=value ...])
#
# Runs the generator at build time (it is rebuilt first when its sources change) and gives
# <name>, a linkable target: the shared library lib<function>.so with <function>.h on its
# include path. FUNCTION_NAME defaults to <name>; TARGETS is the generator's -t (default host;
# e.g. "x86-64-v4,x86-64-v3" for a library that picks AVX-512 or AVX2 at run time).
function(cora_add_library name)
  cmake_parse_arguments(A "" "GENERATOR;GENERATOR_NAME;FUNCTION_NAME;TARGETS" "PARAMS" ${ARGN})
  if(NOT A_GENERATOR)
    message(FATAL_ERROR "cora_add_library(${name}): GENERATOR <target> is required")
  endif()
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "cora_add_library(${name}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  set(fn ${name})
  if(A_FUNCTION_NAME)
    set(fn ${A_FUNCTION_NAME})
  endif()
  set(targets host)
  if(A_TARGETS)
    set(targets ${A_TARGETS})
  endif()
  set(gen_args -o ${CMAKE_CURRENT_BINARY_DIR}/cora_${name} -f ${fn} -t ${targets})
  if(A_GENERATOR_NAME)
    list(APPEND gen_args -g ${A_GENERATOR_NAME})
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/cora_${name})
  file(MAKE_DIRECTORY ${dir})
  add_custom_command(
    OUTPUT ${dir}/lib${fn}.so ${dir}/${fn}.h
    COMMAND $<TARGET_FILE:${A_GENERATOR}> ${gen_args} ${A_PARAMS}
    DEPENDS ${A_GENERATOR}
    COMMENT "cora: generating ${fn} (${targets}) with ${A_GENERATOR}"
    VERBATIM)
  add_custom_target(${name}_generate DEPENDS ${dir}/lib${fn}.so ${dir}/${fn}.h)
  add_library(${name} SHARED IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION ${dir}/lib${fn}.so
    IMPORTED_SONAME lib${fn}.so
    INTERFACE_INCLUDE_DIRECTORIES ${dir})
  add_dependencies(${name} ${name}_generate)
  # A cora built with sanitizers compiles its kernels with them too: whoever links the library
  # then links the sanitizer runtime (cora's interface link options; empty otherwise).
  if(TARGET cora::cora)
    set_property(TARGET ${name} PROPERTY INTERFACE_LINK_OPTIONS $<TARGET_PROPERTY:cora::cora,INTERFACE_LINK_OPTIONS>)
  endif()
endfunction()
