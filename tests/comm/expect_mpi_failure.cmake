# cmake -DCOMMAND=<mpirun;...> -DEXPECT=<text> [-DEXPECT_ALSO=<text>] -DLIMIT_S=<seconds>
#       -P expect_mpi_failure.cmake
# Passes when COMMAND ends within LIMIT_S seconds with a non-zero exit and prints EXPECT (and
# EXPECT_ALSO).
cmake_policy(SET CMP0007 NEW)  # keep empty list items so REMOVE_ITEM can drop them
list(REMOVE_ITEM COMMAND "")
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${LIMIT_S})
string(TIMESTAMP t1 "%s")
math(EXPR elapsed "${t1} - ${t0}")
message("exit: ${rc} after about ${elapsed} s\n--- stdout\n${out}--- stderr\n${err}---")
if(rc MATCHES "timeout")
  message(FATAL_ERROR "the job did not end within ${LIMIT_S} s: a failing rank left the others hanging")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although a rank threw")
endif()
foreach(var EXPECT EXPECT_ALSO)
  if(DEFINED ${var})
    string(FIND "${out}${err}" "${${var}}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the output lacks \"${${var}}\"")
    endif()
  endif()
endforeach()
