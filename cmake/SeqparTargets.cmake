# The header-only core target and its optional components. A component exists only
# when its dependency was found, and adds that dependency only to programs that link it:
#
#   seqpar::seqpar     core (C++20, nlohmann_json for checkpoint headers)
#   seqpar::cpu        + Eigen3 (and OpenMP if found) SEQPAR_WITH_EIGEN=1
#   seqpar::mpi        + MPI::MPI_CXX                 SEQPAR_WITH_MPI=1
#   seqpar::tokenizer  + Oniguruma (pkg-config)       SEQPAR_WITH_ONIGURUMA=1
#   seqpar::cuda       + cudart, cuBLAS               SEQPAR_WITH_CUDA=1
#   seqpar::nccl       + seqpar::cuda and NCCL        SEQPAR_WITH_NCCL=1
#
# SEQPAR_COMPONENTS lists the components defined here, in dependency order.
include(GNUInstallDirs)

set(SEQPAR_COMPONENTS "")

if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3 REQUIRED)
endif()

add_library(seqpar INTERFACE)
add_library(seqpar::seqpar ALIAS seqpar)
target_compile_features(seqpar INTERFACE cxx_std_20)
target_include_directories(seqpar INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
find_package(Threads REQUIRED)  # ThreadComm
target_link_libraries(seqpar INTERFACE nlohmann_json::nlohmann_json Threads::Threads)
set_target_properties(seqpar PROPERTIES EXPORT_NAME seqpar)

# cpu: the Eigen backend.
find_package(Eigen3 3.3 QUIET NO_MODULE)
if(TARGET Eigen3::Eigen)
  add_library(seqpar_cpu INTERFACE)
  add_library(seqpar::cpu ALIAS seqpar_cpu)
  target_link_libraries(seqpar_cpu INTERFACE seqpar Eigen3::Eigen)
  # The CPU ops parallelise their loops and Eigen its GEMMs with OpenMP when it is there.
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(seqpar_cpu INTERFACE OpenMP::OpenMP_CXX)
  endif()
  target_compile_definitions(seqpar_cpu INTERFACE SEQPAR_WITH_EIGEN=1)
  set_target_properties(seqpar_cpu PROPERTIES EXPORT_NAME cpu)
  list(APPEND SEQPAR_COMPONENTS cpu)
endif()

# mpi: MpiComm.
find_package(MPI QUIET COMPONENTS CXX)
if(MPI_CXX_FOUND)
  add_library(seqpar_mpi INTERFACE)
  add_library(seqpar::mpi ALIAS seqpar_mpi)
  target_link_libraries(seqpar_mpi INTERFACE seqpar MPI::MPI_CXX)
  target_compile_definitions(seqpar_mpi INTERFACE SEQPAR_WITH_MPI=1)
  set_target_properties(seqpar_mpi PROPERTIES EXPORT_NAME mpi)
  list(APPEND SEQPAR_COMPONENTS mpi)
endif()

# tokenizer: byte-level BPE over the Oniguruma regex engine. The prefix SEQPAR_ONIG
# keeps the imported target (PkgConfig::SEQPAR_ONIG) clear of a consumer's own.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(SEQPAR_ONIG QUIET IMPORTED_TARGET oniguruma)
endif()
if(TARGET PkgConfig::SEQPAR_ONIG)
  add_library(seqpar_tokenizer INTERFACE)
  add_library(seqpar::tokenizer ALIAS seqpar_tokenizer)
  target_link_libraries(seqpar_tokenizer INTERFACE seqpar PkgConfig::SEQPAR_ONIG)
  target_compile_definitions(seqpar_tokenizer INTERFACE SEQPAR_WITH_ONIGURUMA=1)
  set_target_properties(seqpar_tokenizer PROPERTIES EXPORT_NAME tokenizer)
  list(APPEND SEQPAR_COMPONENTS tokenizer)
endif()

# cuda and nccl: only when the build asked for CUDA (SEQPAR_WITH_CUDA), so that a
# CPU build never looks for the toolkit. On the emulated device of the tests
# (SEQPAR_CUDA_EMULATION) they, and the toolkit's targets that tests name, are the emulation.
if(SEQPAR_CUDA_EMULATION)
  include(SeqparCudaEmulation)
  seqpar_emulated_cuda_targets()
elseif(SEQPAR_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(seqpar_cuda INTERFACE)
  add_library(seqpar::cuda ALIAS seqpar_cuda)
  target_link_libraries(seqpar_cuda INTERFACE seqpar CUDA::cudart CUDA::cublas)
  target_compile_definitions(seqpar_cuda INTERFACE SEQPAR_WITH_CUDA=1)
  set_target_properties(seqpar_cuda PROPERTIES EXPORT_NAME cuda)
  list(APPEND SEQPAR_COMPONENTS cuda)

  include(SeqparNccl)
  seqpar_find_nccl()
  if(TARGET seqpar::nccl_library)
    add_library(seqpar_nccl INTERFACE)
    add_library(seqpar::nccl ALIAS seqpar_nccl)
    target_link_libraries(seqpar_nccl INTERFACE seqpar_cuda seqpar::nccl_library)
    target_compile_definitions(seqpar_nccl INTERFACE SEQPAR_WITH_NCCL=1)
    set_target_properties(seqpar_nccl PROPERTIES EXPORT_NAME nccl)
    list(APPEND SEQPAR_COMPONENTS nccl)
  else()
    message(STATUS "seqpar: NCCL not found next to the CUDA toolkit; seqpar::nccl is not defined")
  endif()
endif()

# The flags of this repository's own programs (never forced on users). nvcc takes the
# host compiler's flags through -Xcompiler. SEQPAR_NATIVE_ARCH=OFF drops -march=native,
# for binaries built here and run on another machine (the GPU runs).
add_library(seqpar_dev_flags INTERFACE)
# The Sanitize configuration keeps its preset's level (asan -O0, tsan -O1), and Check
# (preset cuda-check: compiled and linked, never run) its -O0.
target_compile_options(seqpar_dev_flags INTERFACE
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Sanitize,Check>>>:-O2>"
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
# Libraries a program does not use are not recorded as needed (a CUDA benchmark that
# links seqpar::mpi but never calls MPI then starts on a machine without OpenMPI).
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" AND NOT APPLE)
  target_link_options(seqpar_dev_flags INTERFACE "LINKER:--as-needed")
endif()
if(NOT DEFINED SEQPAR_NATIVE_ARCH OR SEQPAR_NATIVE_ARCH)
  target_compile_options(seqpar_dev_flags INTERFACE
    "$<$<COMPILE_LANGUAGE:CXX>:-march=native>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-march=native>")
endif()
