# Configures, builds and runs the consumer project (tests/package/consumer) from an
# empty build folder: cmake -DSETTINGS=... -DNAME=<test> -DMODE=<mode>
#   [-DCOMPONENTS=a,b] [-DVERSION=x.y] [-DEXPECT_ERROR=<regex>] [-DCONFIG=<config>] -P consumer.cmake
# With EXPECT_ERROR the configure step must fail with a matching message, and that is all.
cmake_minimum_required(VERSION 3.24)
include("${SETTINGS}")
set(build "${PKG_WORK}/${NAME}")
file(REMOVE_RECURSE "${build}")

set(config "${CONFIG}")
if(NOT config)
  set(config "${PKG_BUILD_TYPE}")
endif()
set(args -S "${PKG_CONSUMER_SOURCE}" -B "${build}" -G "${PKG_GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${PKG_CXX_COMPILER}"
    "-DSEQPAR_CONSUMER_MODE=${MODE}"
    "-DSEQPAR_CONSUMER_COMPONENTS=${COMPONENTS}"
    "-DSEQPAR_CONSUMER_VERSION=${VERSION}"
    "-DSEQPAR_CONSUMER_PREFIX=${PKG_PREFIX}"
    "-DSEQPAR_SOURCE_DIR=${PKG_SEQPAR_SOURCE}"
    "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"
    "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF")
if(PKG_MAKE_PROGRAM)
  list(APPEND args "-DCMAKE_MAKE_PROGRAM=${PKG_MAKE_PROGRAM}")
endif()
if(config)
  list(APPEND args "-DCMAKE_BUILD_TYPE=${config}")
endif()
if(MODE STREQUAL "fetch_url")
  file(SHA256 "${PKG_ARCHIVE}" sha256)
  list(APPEND args "-DSEQPAR_ARCHIVE=${PKG_ARCHIVE}" "-DSEQPAR_ARCHIVE_SHA256=${sha256}")
endif()
# The prefix path is a list: it travels as one quoted argument.
set(prefix_path "${PKG_PREFIX};${PKG_PREFIX_PATH}")

execute_process(COMMAND "${CMAKE_COMMAND}" ${args} "-DCMAKE_PREFIX_PATH=${prefix_path}"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(EXPECT_ERROR)
  if(result EQUAL 0)
    message(STATUS "${output}")
    message(FATAL_ERROR "${NAME}: configuring the consumer succeeded, but it must fail with "
                        "/${EXPECT_ERROR}/")
  endif()
  if(NOT output MATCHES "${EXPECT_ERROR}")
    message(STATUS "${output}")
    message(FATAL_ERROR "${NAME}: configuring the consumer failed, but without /${EXPECT_ERROR}/")
  endif()
  message(STATUS "${NAME}: configure failed as expected (/${EXPECT_ERROR}/)")
  return()
endif()
if(NOT result EQUAL 0)
  message(STATUS "${output}")
  message(FATAL_ERROR "${NAME}: configuring the consumer failed (${result})")
endif()

set(build_args "")
if(config)
  set(build_args --config "${config}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" ${build_args}
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(STATUS "${output}")
  message(FATAL_ERROR "${NAME}: building the consumer failed (${result})")
endif()

file(GLOB program_files "${build}/consumer-program-*.txt")
if(config)
  set(program_files "${build}/consumer-program-${config}.txt")
endif()
list(GET program_files 0 program_file)
file(READ "${program_file}" program)
execute_process(COMMAND "${program}" RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
message(STATUS "${output}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NAME}: the consumer program failed (${result})")
endif()
# The training program on the run management, where the consumer built one.
string(REPLACE "consumer-program-" "consumer-run-" run_file "${program_file}")
if(EXISTS "${run_file}")
  file(READ "${run_file}" run_program)
  set(commands "${run_program}|${build}/run-threads")
  # Under mpirun too, one rank per process, where the consumer linked seqpar::mpi.
  if(EXISTS "${build}/consumer-run-mpi.txt" AND PKG_MPIEXEC)
    set(launch "${PKG_MPIEXEC}" -n 4)
    execute_process(COMMAND "${PKG_MPIEXEC}" --version OUTPUT_VARIABLE mpiexec_version ERROR_QUIET)
    if(mpiexec_version MATCHES "Open MPI|OpenRTE")
      list(APPEND launch --oversubscribe --allow-run-as-root)
    endif()
    set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
    set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
    set(ENV{OMP_NUM_THREADS} 1)
    list(JOIN launch "|" launch_text)
    list(APPEND commands "${launch_text}|${run_program}|${build}/run-mpi")
  endif()
  foreach(command IN LISTS commands)
    string(REPLACE "|" ";" command "${command}")
    execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE output
                    ERROR_VARIABLE output TIMEOUT 240)
    message(STATUS "${output}")
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "${NAME}: the training program failed (${result}): ${command}")
    endif()
    if(NOT output MATCHES "run consumer \\(4 ranks\\): ok")
      message(FATAL_ERROR "${NAME}: the training program did not say it ran on 4 ranks")
    endif()
  endforeach()
endif()
