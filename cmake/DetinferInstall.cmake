# Installation: public headers, the shared and static libraries, the CLI, the CMake
# package (detinferConfig.cmake, version file, exported targets) and pkg-config files.
#
# Consumers:
#   find_package(detinfer 0.1 REQUIRED)                     -> detinfer::detinfer (shared)
#   find_package(detinfer 0.1 REQUIRED COMPONENTS static)   -> also detinfer::detinfer_static
#   pkg-config --cflags --libs detinfer                     (shared)
#   pkg-config --static --cflags --libs detinfer-static     (static)
# The shared library keeps its third-party libraries private; the static one needs them
# at the consumer's link, so its component finds them (find_dependency) and the
# detinfer-static.pc file lists them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DETINFER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/detinfer)
set(DETINFER_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Only detinfer's public headers: include/detinfer/*.h (no internal or third-party ones).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/detinfer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${DETINFER_GENERATED_DIR}/include/detinfer/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/detinfer)

# The shared library exports only the DETINFER_API symbols (hidden visibility) and, via
# this version script, nothing from the C++ standard library templates it instantiates.
set(DETINFER_VERSION_SCRIPT ${PROJECT_SOURCE_DIR}/cmake/detinfer.map)
target_link_options(detinfer PRIVATE "LINKER:--version-script=${DETINFER_VERSION_SCRIPT}")
set_property(TARGET detinfer APPEND PROPERTY LINK_DEPENDS ${DETINFER_VERSION_SCRIPT})

# --- third-party dependencies of the static library -------------------------------------
# Each module's third-party targets (detinfer_add_module LIBS) are mapped to what the
# consumer needs: CMake code for detinferConfig.cmake that creates detinfer::dep_<name>,
# and the pkg-config Requires.private / Libs.private entries.
get_property(_detinfer_modules GLOBAL PROPERTY DETINFER_MODULES)
set(_third_party "")
foreach(m ${_detinfer_modules})
  get_target_property(_libs detinfer_${m} INTERFACE_LINK_LIBRARIES)
  if(_libs)
    foreach(l ${_libs})
      # PRIVATE links show up as $<LINK_ONLY:...> (detinfer_flags): not a usage requirement.
      if(l MATCHES "^\\$<LINK_ONLY:")
        continue()
      endif()
      if(NOT l MATCHES "^detinfer_" OR l STREQUAL "detinfer_torch_deps")
        list(APPEND _third_party ${l})
      endif()
    endforeach()
  endif()
endforeach()
list(REMOVE_DUPLICATES _third_party)

set(DETINFER_STATIC_DEPS_CODE "")
set(DETINFER_PC_REQUIRES_PRIVATE "")
set(DETINFER_PC_LIBS_PRIVATE "")
set(_static_link "")
macro(_detinfer_dep name code requires libs)
  string(APPEND DETINFER_STATIC_DEPS_CODE "${code}\n")
  list(APPEND _static_link "$<INSTALL_INTERFACE:detinfer::dep_${name}>")
  if(NOT "${requires}" STREQUAL "")
    list(APPEND DETINFER_PC_REQUIRES_PRIVATE ${requires})
  endif()
  if(NOT "${libs}" STREQUAL "")
    list(APPEND DETINFER_PC_LIBS_PRIVATE ${libs})
  endif()
endmacro()
macro(_detinfer_pkg_dep name pkg)
  _detinfer_dep(${name}
    "_detinfer_pkg(${name} ${pkg})" ${pkg} "")
endmacro()

foreach(l ${_third_party})
  if(l STREQUAL "Threads::Threads")
    _detinfer_dep(threads "_detinfer_target(threads Threads Threads::Threads)" "" "-pthread")
  elseif(l STREQUAL "spdlog::spdlog")
    _detinfer_dep(spdlog "_detinfer_target(spdlog spdlog spdlog::spdlog)" "spdlog" "")
  elseif(l STREQUAL "nlohmann_json::nlohmann_json")
    _detinfer_dep(nlohmann_json
      "_detinfer_target(nlohmann_json nlohmann_json nlohmann_json::nlohmann_json)"
      "nlohmann_json" "")
  elseif(l STREQUAL "PkgConfig::XXHASH")
    _detinfer_pkg_dep(xxhash libxxhash)
  elseif(l STREQUAL "PkgConfig::PCRE2")
    _detinfer_pkg_dep(pcre2 libpcre2-8)
  elseif(l STREQUAL "PkgConfig::HTTPLIB")
    _detinfer_pkg_dep(httplib cpp-httplib)
  elseif(l STREQUAL "hiredis::hiredis")
    _detinfer_pkg_dep(hiredis hiredis)
  elseif(l STREQUAL "detinfer_torch_deps")
    # libtorch ships no .pc file: name its libraries (Debian puts them in the libdir).
    get_filename_component(_torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
    _detinfer_dep(torch "_detinfer_torch()" ""
      "-L${_torch_libdir};-ltorch;-ltorch_cpu;-lc10")
  elseif(l MATCHES "^CUDA::(.*)$")
    set(_cu ${CMAKE_MATCH_1})
    set(_cu_libs "-L${CUDAToolkit_LIBRARY_DIR};-l${_cu}")
    if(_cu MATCHES "_static$")
      list(APPEND _cu_libs -ldl -lrt)  # what the static CUDA runtime needs
    endif()
    _detinfer_dep(cuda_${_cu} "_detinfer_target(cuda_${_cu} CUDAToolkit CUDA::${_cu})" ""
      "${_cu_libs}")
  else()
    message(WARNING "DetinferInstall: no install mapping for third-party target '${l}'; "
      "static consumers will have to link it themselves")
  endif()
endforeach()
target_link_libraries(detinfer_static INTERFACE ${_static_link})
list(JOIN DETINFER_PC_REQUIRES_PRIVATE " " DETINFER_PC_REQUIRES_PRIVATE)
list(JOIN DETINFER_PC_LIBS_PRIVATE " " DETINFER_PC_LIBS_PRIVATE)

# --- libraries and exported targets --------------------------------------------------------
set_target_properties(detinfer PROPERTIES EXPORT_NAME detinfer)
set_target_properties(detinfer_static PROPERTIES EXPORT_NAME detinfer_static)
install(TARGETS detinfer EXPORT detinferTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS detinfer_static EXPORT detinferStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The installed CLI finds the installed library wherever the prefix is.
if(TARGET detinfer_cli)
  set_target_properties(detinfer_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
install(EXPORT detinferTargets NAMESPACE detinfer:: DESTINATION ${DETINFER_INSTALL_CMAKEDIR})
install(EXPORT detinferStaticTargets NAMESPACE detinfer::
  DESTINATION ${DETINFER_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/detinferConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/detinferConfig.cmake
  INSTALL_DESTINATION ${DETINFER_INSTALL_CMAKEDIR})
# 0.x releases make no compatibility promise across minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/detinferConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/detinferConfig.cmake
  ${PROJECT_BINARY_DIR}/package/detinferConfigVersion.cmake
  DESTINATION ${DETINFER_INSTALL_CMAKEDIR})

# pkg-config files locate the prefix relative to themselves, so an installed tree can be
# moved (and `cmake --install --prefix` works without reconfiguring).
file(RELATIVE_PATH DETINFER_PC_TO_PREFIX
  /prefix/${DETINFER_INSTALL_PKGCONFIGDIR} /prefix)
string(REGEX REPLACE "/$" "" DETINFER_PC_TO_PREFIX "${DETINFER_PC_TO_PREFIX}")
foreach(pc detinfer detinfer-static)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/package/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/package/${pc}.pc DESTINATION ${DETINFER_INSTALL_PKGCONFIGDIR})
endforeach()
