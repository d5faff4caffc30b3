# The header-only core target and its optional components. A component adds its
# dependency only when a consumer links it.
include(GNUInstallDirs)

add_library(seqpar INTERFACE)
add_library(seqpar::seqpar ALIAS seqpar)
target_compile_features(seqpar INTERFACE cxx_std_20)
target_include_directories(seqpar INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(seqpar PROPERTIES EXPORT_NAME seqpar)

# cpu: the Eigen backend.
find_package(Eigen3 3.3 QUIET NO_MODULE)
if(TARGET Eigen3::Eigen)
  add_library(seqpar_cpu INTERFACE)
  add_library(seqpar::cpu ALIAS seqpar_cpu)
  target_link_libraries(seqpar_cpu INTERFACE seqpar Eigen3::Eigen)
  target_compile_definitions(seqpar_cpu INTERFACE SEQPAR_WITH_EIGEN=1)
  set_target_properties(seqpar_cpu PROPERTIES EXPORT_NAME cpu)
endif()

# mpi: MpiComm.
find_package(MPI QUIET COMPONENTS CXX)
if(MPI_CXX_FOUND)
  add_library(seqpar_mpi INTERFACE)
  add_library(seqpar::mpi ALIAS seqpar_mpi)
  target_link_libraries(seqpar_mpi INTERFACE seqpar MPI::MPI_CXX)
  target_compile_definitions(seqpar_mpi INTERFACE SEQPAR_WITH_MPI=1)
  set_target_properties(seqpar_mpi PROPERTIES EXPORT_NAME mpi)
endif()

# tokenizer: byte-level BPE over the Oniguruma regex engine.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(ONIG QUIET IMPORTED_TARGET oniguruma)
endif()
if(TARGET PkgConfig::ONIG)
  add_library(seqpar_tokenizer INTERFACE)
  add_library(seqpar::tokenizer ALIAS seqpar_tokenizer)
  target_link_libraries(seqpar_tokenizer INTERFACE seqpar PkgConfig::ONIG)
  target_compile_definitions(seqpar_tokenizer INTERFACE SEQPAR_WITH_ONIGURUMA=1)
  set_target_properties(seqpar_tokenizer PROPERTIES EXPORT_NAME tokenizer)
endif()

# The flags of this repository's own programs (never forced on users).
add_library(seqpar_dev_flags INTERFACE)
target_compile_options(seqpar_dev_flags INTERFACE -march=native -O2 -Wall -Wextra)
