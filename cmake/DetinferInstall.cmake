# Installation: public headers, the shared and static libraries and the CLI.
# (The CMake package config and pkg-config file are completed by the embedding work.)
include(GNUInstallDirs)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/detinfer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${DETINFER_GENERATED_DIR}/include/detinfer/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/detinfer)
install(TARGETS detinfer detinfer_static
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
