# The emulated CUDA device of the tests (SEQPAR_CUDA_EMULATION): tests/emulation builds the
# emulation, the library seqpar_cuda_emulation; these functions point the CUDA programs at it.
#
# seqpar_emulated_cuda_targets(): seqpar::cuda and seqpar::nccl, and the CUDA toolkit's targets
# that programs name (CUDA::cudart, CUDA::cudart_static, CUDA::cublas, seqpar::nccl_library), all of them the emulation.
function(seqpar_emulated_cuda_targets)
  foreach(name IN ITEMS cudart cudart_static cublas)
    add_library(CUDA::${name} INTERFACE IMPORTED GLOBAL)
    set_target_properties(CUDA::${name} PROPERTIES INTERFACE_LINK_LIBRARIES seqpar_cuda_emulation)
  endforeach()
  add_library(seqpar::nccl_library INTERFACE IMPORTED GLOBAL)
  set_target_properties(seqpar::nccl_library PROPERTIES
                        INTERFACE_LINK_LIBRARIES seqpar_cuda_emulation)
  add_library(seqpar_cuda INTERFACE)
  add_library(seqpar::cuda ALIAS seqpar_cuda)
  target_link_libraries(seqpar_cuda INTERFACE seqpar seqpar_cuda_emulation)
  target_compile_definitions(seqpar_cuda INTERFACE SEQPAR_WITH_CUDA=1)
  add_library(seqpar_nccl INTERFACE)
  add_library(seqpar::nccl ALIAS seqpar_nccl)
  target_link_libraries(seqpar_nccl INTERFACE seqpar_cuda)
  target_compile_definitions(seqpar_nccl INTERFACE SEQPAR_WITH_NCCL=1)
  set(SEQPAR_COMPONENTS ${SEQPAR_COMPONENTS} cuda nccl PARENT_SCOPE)
endfunction()

# seqpar_emulate_cuda_sources(): after all subdirectories are added, every .cu source of every
# target is compiled by the host compiler as a unit that holds kernels
# (SEQPAR_EMULATED_CUDA_KERNELS), contracting multiplies and adds into fused multiply-adds as
# nvcc does by default (-ffp-contract=fast on an FMA machine), nvcc's pragmas (#pragma unroll)
# ignored; its programs export their
# symbols, by which the emulation names a kernel launched through a pointer.
function(_seqpar_emulate_in dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(has_kernels FALSE)
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "\\.cu$")
        continue()
      endif()
      set(has_kernels TRUE)
      if(NOT IS_ABSOLUTE "${source}")
        set(source "${source_dir}/${source}")
      endif()
      set_source_files_properties("${source}" TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX)
      set_property(SOURCE "${source}" TARGET_DIRECTORY ${target} APPEND PROPERTY
                   COMPILE_DEFINITIONS SEQPAR_EMULATED_CUDA_KERNELS)
      set_property(SOURCE "${source}" TARGET_DIRECTORY ${target} APPEND PROPERTY
                   COMPILE_OPTIONS -ffp-contract=fast -march=native -Wno-unknown-pragmas)
    endforeach()
    if(has_kernels AND type STREQUAL "EXECUTABLE")
      set_target_properties(${target} PROPERTIES ENABLE_EXPORTS ON)
    endif()
  endforeach()
  get_property(children DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(child IN LISTS children)
    _seqpar_emulate_in("${child}")
  endforeach()
endfunction()

function(seqpar_emulate_cuda_sources)
  _seqpar_emulate_in("${PROJECT_SOURCE_DIR}")
endfunction()
