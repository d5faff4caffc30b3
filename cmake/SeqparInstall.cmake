# Install rules: headers, the exported targets (one export set per component, so that
# a consumer loads a component and its dependency only when it asks for it), the
# package config and version files, and the documentation.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(SEQPAR_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/seqpar"
    CACHE STRING "Where the seqpar package config goes, relative to the install prefix")
mark_as_advanced(SEQPAR_INSTALL_CMAKEDIR)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT seqpar_Development)

install(TARGETS seqpar EXPORT seqparTargets COMPONENT seqpar_Development)
install(EXPORT seqparTargets
        NAMESPACE seqpar::
        FILE seqpar-targets.cmake
        DESTINATION "${SEQPAR_INSTALL_CMAKEDIR}"
        COMPONENT seqpar_Development)
foreach(component IN LISTS SEQPAR_COMPONENTS)
  install(TARGETS seqpar_${component} EXPORT seqpar_${component}Targets
          COMPONENT seqpar_Development)
  install(EXPORT seqpar_${component}Targets
          NAMESPACE seqpar::
          FILE seqpar-${component}-targets.cmake
          DESTINATION "${SEQPAR_INSTALL_CMAKEDIR}"
          COMPONENT seqpar_Development)
endforeach()

# Read by seqpar-config.cmake.in.
set(SEQPAR_INSTALLED_COMPONENTS "${SEQPAR_COMPONENTS}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/seqpar-config.cmake.in"
  "${PROJECT_BINARY_DIR}/seqpar-config.cmake"
  INSTALL_DESTINATION "${SEQPAR_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/seqpar-config-version.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ARCH_INDEPENDENT)
install(FILES
          "${PROJECT_BINARY_DIR}/seqpar-config.cmake"
          "${PROJECT_BINARY_DIR}/seqpar-config-version.cmake"
          "${PROJECT_SOURCE_DIR}/cmake/SeqparNccl.cmake"
        DESTINATION "${SEQPAR_INSTALL_CMAKEDIR}"
        COMPONENT seqpar_Development)

set(seqpar_docs "")
foreach(doc IN ITEMS README.md LICENSE)
  if(EXISTS "${PROJECT_SOURCE_DIR}/${doc}")
    list(APPEND seqpar_docs "${PROJECT_SOURCE_DIR}/${doc}")
  endif()
endforeach()
install(FILES ${seqpar_docs} DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT seqpar_Documentation)
if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/docs")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/"
          DESTINATION "${CMAKE_INSTALL_DOCDIR}"
          COMPONENT seqpar_Documentation
          FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "*.svg")
endif()
