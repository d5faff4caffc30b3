# Run by the tests of seqpar_add_compile_fail_test (cmake -DCF_ARGS=<file> -P <this>):
# compiles one source and succeeds only if the compiler rejects it with a message that
# matches the expected regular expression.
cmake_minimum_required(VERSION 3.24)
if(NOT CF_ARGS OR NOT EXISTS "${CF_ARGS}")
  message(FATAL_ERROR "compile-fail check: argument file '${CF_ARGS}' not found")
endif()
include("${CF_ARGS}")

separate_arguments(flags UNIX_COMMAND "${CF_FLAGS}")
set(command "${CF_COMPILER}" ${flags} "${CF_STD}")
# The compiler's own folders (e.g. /usr/include, where nlohmann_json lives) are left
# out, as CMake does: -I/usr/include breaks #include_next in the standard library.
list(REMOVE_DUPLICATES CF_INCLUDES)
foreach(dir IN LISTS CF_INCLUDES)
  if(NOT dir IN_LIST CF_IMPLICIT_INCLUDES)
    list(APPEND command "-I${dir}")
  endif()
endforeach()
foreach(def IN LISTS CF_DEFINITIONS)
  list(APPEND command "-D${def}")
endforeach()
# Only the front end runs: every rejection checked here (static_assert, a constraint, an
# ill-formed expression) is its, and no object file is needed.
list(APPEND command -fsyntax-only "${CF_SOURCE}")

execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
list(JOIN command " " shown)
if(result EQUAL 0)
  message(STATUS "${shown}\n${output}")
  message(FATAL_ERROR "${CF_NAME}: ${CF_SOURCE} compiled, but it must fail to compile "
                      "with a message matching /${CF_REGEX}/")
endif()
if(NOT output MATCHES "${CF_REGEX}")
  message(STATUS "${shown}\n${output}")
  message(FATAL_ERROR "${CF_NAME}: ${CF_SOURCE} failed to compile, but the compiler output "
                      "(above) does not match /${CF_REGEX}/")
endif()
message(STATUS "${CF_NAME}: rejected by the compiler with the expected message /${CF_REGEX}/")
