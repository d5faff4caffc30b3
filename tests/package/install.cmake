# package.install: installs the build tree BUILD_DIR into a fresh scratch prefix and
# checks that the headers, the package config and every built component's targets
# file, the documentation and seqpar-plan are where a consumer expects them.
cmake_minimum_required(VERSION 3.24)
include("${SETTINGS}")
file(REMOVE_RECURSE "${PKG_PREFIX}")
set(config_args "")
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PKG_PREFIX}" ${config_args}
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  message(STATUS "${output}")
  message(FATAL_ERROR "cmake --install failed (${result})")
endif()

set(expected
  include/seqpar/seqpar.hpp
  include/seqpar/core/dtype.hpp
  share/cmake/seqpar/seqpar-config.cmake
  share/cmake/seqpar/seqpar-config-version.cmake
  share/cmake/seqpar/seqpar-targets.cmake
  share/cmake/seqpar/SeqparNccl.cmake
  share/doc/seqpar/LICENSE
  share/doc/seqpar/README.md)
foreach(component IN LISTS PKG_BUILT_COMPONENTS)
  list(APPEND expected share/cmake/seqpar/seqpar-${component}-targets.cmake)
endforeach()
if(PKG_BUILT_APPS)
  list(APPEND expected bin/seqpar-plan${CMAKE_EXECUTABLE_SUFFIX})
endif()
set(missing "")
foreach(file IN LISTS expected)
  if(NOT EXISTS "${PKG_PREFIX}/${file}")
    string(APPEND missing "\n  ${file}")
  endif()
endforeach()
if(missing)
  message(STATUS "${output}")
  message(FATAL_ERROR "missing from the install prefix ${PKG_PREFIX}:${missing}")
endif()

# A header-only package installs nothing machine-specific: no absolute path of this
# build machine may leak into the exported files (except the dependencies' own).
file(GLOB exported "${PKG_PREFIX}/share/cmake/seqpar/*.cmake")
foreach(file IN LISTS exported)
  file(READ "${file}" text)
  string(FIND "${text}" "${PKG_SEQPAR_SOURCE}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${file} refers to the source tree ${PKG_SEQPAR_SOURCE}")
  endif()
endforeach()
list(LENGTH expected count)
message(STATUS "installed into ${PKG_PREFIX}; ${count} expected files present")
