# seqpar_add_compile_fail_test(NAME <name> SOURCE <file.cpp> REGEX <regex>
#                              [LIBS <targets...>] [DEFINITIONS <defs...>])
#
# Registers the CTest test <name>, which compiles <file.cpp> as C++20 with the include
# directories and definitions of LIBS (default: seqpar::cpu when it exists, otherwise
# seqpar::seqpar; Eigen's include folder comes with seqpar::cpu). The test passes only
# when the compilation fails AND the compiler output matches <regex>; a source that
# compiles, or fails with another message, fails the test and prints the output.
#
# The test calls the C++ compiler directly (with CMAKE_CXX_FLAGS, without the build
# type's optimisation flags, front end only: -fsyntax-only), not the build tool, so it
# runs in parallel with anything else. Compilers that take GCC-style flags (g++, clang++)
# are supported.
set(SEQPAR_COMPILE_FAIL_CHECK "${CMAKE_CURRENT_LIST_DIR}/SeqparCompileFailCheck.cmake")

function(seqpar_add_compile_fail_test)
  cmake_parse_arguments(ARG "" "NAME;SOURCE;REGEX" "LIBS;DEFINITIONS" ${ARGN})
  foreach(required IN ITEMS NAME SOURCE REGEX)
    if(NOT ARG_${required})
      message(FATAL_ERROR "seqpar_add_compile_fail_test: ${required} is required")
    endif()
  endforeach()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "seqpar_add_compile_fail_test: unexpected arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_LIBS)
    if(TARGET seqpar::cpu)
      set(ARG_LIBS seqpar::cpu)
    else()
      set(ARG_LIBS seqpar::seqpar)
    endif()
  endif()
  get_filename_component(source "${ARG_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "seqpar_add_compile_fail_test(${ARG_NAME}): no file ${source}")
  endif()

  # A never-built object library carries the usage requirements of LIBS; its
  # transitive include directories and definitions are written per configuration.
  string(MAKE_C_IDENTIFIER "seqpar_compile_fail_${ARG_NAME}" probe)
  add_library(${probe} OBJECT EXCLUDE_FROM_ALL "${source}")
  target_link_libraries(${probe} PRIVATE ${ARG_LIBS})
  target_compile_definitions(${probe} PRIVATE ${ARG_DEFINITIONS})

  # The same -std flag CMake gives C++20 targets (gnu++20 unless extensions are off).
  if(NOT DEFINED CMAKE_CXX_EXTENSIONS OR CMAKE_CXX_EXTENSIONS)
    set(std_flag "${CMAKE_CXX20_EXTENSION_COMPILE_OPTION}")
  else()
    set(std_flag "${CMAKE_CXX20_STANDARD_COMPILE_OPTION}")
  endif()
  if(NOT std_flag)
    set(std_flag "-std=c++20")
  endif()
  set(work "${CMAKE_CURRENT_BINARY_DIR}/${probe}")
  file(GENERATE OUTPUT "${work}/args-$<CONFIG>.cmake" CONTENT
"set(CF_NAME [==[${ARG_NAME}]==])
set(CF_COMPILER [==[${CMAKE_CXX_COMPILER}]==])
set(CF_FLAGS [==[${CMAKE_CXX_FLAGS}]==])
set(CF_STD [==[${std_flag}]==])
set(CF_INCLUDES [==[$<TARGET_PROPERTY:${probe},INCLUDE_DIRECTORIES>]==])
set(CF_IMPLICIT_INCLUDES [==[${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}]==])
set(CF_DEFINITIONS [==[$<TARGET_PROPERTY:${probe},COMPILE_DEFINITIONS>]==])
set(CF_SOURCE [==[${source}]==])
set(CF_REGEX [==[${ARG_REGEX}]==])
")
  add_test(NAME ${ARG_NAME}
           COMMAND "${CMAKE_COMMAND}" "-DCF_ARGS=${work}/args-$<CONFIG>.cmake"
                   -P "${SEQPAR_COMPILE_FAIL_CHECK}")
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS compile-fail TIMEOUT 120)
endfunction()
