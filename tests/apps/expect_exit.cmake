# Runs a program and checks how it fails: ctest -P script for the apps' command-line tests.
#   -DCOMMAND=prog|arg|arg   the command, words separated by '|'
#   -DEXPECT_STATUS=2        its exit status
#   -DEXPECT_REGEX=...       what its stderr (or, for exit 0, stdout) must match
#   -DONE_LINE=ON            stderr must be exactly one line
string(REPLACE "|" ";" cmd "${COMMAND}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
set(report "command: ${COMMAND}\nexit status: ${status}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT status STREQUAL EXPECT_STATUS)
  message(FATAL_ERROR "expected exit status ${EXPECT_STATUS}\n${report}")
endif()
set(text "${err}")
if(EXPECT_STATUS STREQUAL "0")
  set(text "${out}")
endif()
if(NOT text MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'\n${report}")
endif()
if(ONE_LINE)
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "expected a one-line message on stderr, got ${n} lines\n${report}")
  endif()
endif()
