# seqpar_find_nccl(): looks for NCCL (nccl.h and libnccl) in $NCCL_ROOT / $NCCL_HOME,
# next to the CUDA toolkit (find_package(CUDAToolkit) must have run) and in the system
# folders, and defines the imported target seqpar::nccl_library when both are found.
# Used by the build tree and by the installed package config alike.
function(seqpar_find_nccl)
  if(TARGET seqpar::nccl_library)
    return()
  endif()
  set(hints "")
  foreach(root IN ITEMS "$ENV{NCCL_ROOT}" "$ENV{NCCL_HOME}")
    if(root)
      list(APPEND hints "${root}")
    endif()
  endforeach()
  set(include_hints ${hints} ${CUDAToolkit_INCLUDE_DIRS})
  set(library_hints ${hints} ${CUDAToolkit_LIBRARY_DIR})
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND library_hints "${CUDAToolkit_LIBRARY_ROOT}")
  endif()

  find_path(SEQPAR_NCCL_INCLUDE_DIR nccl.h
    HINTS ${include_hints}
    PATH_SUFFIXES include
    DOC "Folder holding nccl.h")
  find_library(SEQPAR_NCCL_LIBRARY nccl
    HINTS ${library_hints}
    PATH_SUFFIXES lib64 lib
    DOC "The NCCL library (libnccl.so)")
  mark_as_advanced(SEQPAR_NCCL_INCLUDE_DIR SEQPAR_NCCL_LIBRARY)
  if(NOT SEQPAR_NCCL_INCLUDE_DIR OR NOT SEQPAR_NCCL_LIBRARY)
    return()
  endif()

  set(version "")
  file(STRINGS "${SEQPAR_NCCL_INCLUDE_DIR}/nccl.h" defines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(part IN ITEMS MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${part} ([0-9]+)" _ "${defines}")
    if(CMAKE_MATCH_1 STREQUAL "")
      set(version "")
      break()
    endif()
    string(APPEND version ".${CMAKE_MATCH_1}")
  endforeach()
  string(REGEX REPLACE "^\\." "" version "${version}")

  add_library(seqpar::nccl_library UNKNOWN IMPORTED)
  set_target_properties(seqpar::nccl_library PROPERTIES
    IMPORTED_LOCATION "${SEQPAR_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SEQPAR_NCCL_INCLUDE_DIR}")
  set(SEQPAR_NCCL_VERSION "${version}" PARENT_SCOPE)
  include(FindPackageMessage)
  find_package_message(SeqparNCCL "seqpar: NCCL ${version} at ${SEQPAR_NCCL_LIBRARY}"
                       "[${SEQPAR_NCCL_LIBRARY}][${SEQPAR_NCCL_INCLUDE_DIR}][${version}]")
endfunction()
