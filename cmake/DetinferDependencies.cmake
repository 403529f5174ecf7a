# Every dependency comes from a Debian package (scripts/install-deps.sh); nothing is
# downloaded or vendored at build time. The core library needs only Threads, spdlog,
# nlohmann-json, xxHash and PCRE2; libtorch, hiredis, CLI11 and cpp-httplib are optional
# (DETINFER_WITH_TORCH, DETINFER_WITH_REDIS, DETINFER_BUILD_CLI: AUTO, ON or OFF) and are
# not even looked for when their option is OFF.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

# detinfer_optional(<option>): checks an AUTO/ON/OFF value; the caller looks for the
# packages unless it is OFF, then detinfer_optional_found sets the result (ON/OFF).
function(detinfer_optional option)
  if(NOT "${${option}}" MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${option} must be AUTO, ON or OFF, got '${${option}}'")
  endif()
endfunction()
macro(detinfer_optional_found option result found what)
  if(${found})
    set(${result} ON)
  else()
    set(${result} OFF)
    if("${${option}}" STREQUAL "ON")
      message(FATAL_ERROR "${option}=ON but ${what} was not found")
    endif()
  endif()
  message(STATUS "detinfer: ${option}=${${option}} -> ${${result}}")
endmacro()

# libtorch: the model's "fast" numerics mode and the PyTorch operator library; kernel TUs
# never include it. Without it, NumericsMode::kFast is Error(kUnsupported) at load.
detinfer_optional(DETINFER_WITH_TORCH)
set(_found OFF)
if(NOT DETINFER_WITH_TORCH STREQUAL "OFF")
  find_package(Torch QUIET)
  set(_found ${Torch_FOUND})
endif()
detinfer_optional_found(DETINFER_WITH_TORCH DETINFER_HAVE_TORCH _found "libtorch (Torch)")
if(DETINFER_HAVE_TORCH)
  add_library(detinfer_torch_deps INTERFACE)
  target_link_libraries(detinfer_torch_deps INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(detinfer_torch_deps SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
endif()

# hiredis: the Redis tiers of the KV-prefix and result caches. Without it, enabling a
# Redis tier is Error(kUnsupported) at session open.
detinfer_optional(DETINFER_WITH_REDIS)
set(_found OFF)
if(NOT DETINFER_WITH_REDIS STREQUAL "OFF")
  find_package(hiredis QUIET CONFIG)
  if(NOT TARGET hiredis::hiredis)
    pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
    if(HIREDIS_FOUND)
      add_library(hiredis::hiredis ALIAS PkgConfig::HIREDIS)
    endif()
  endif()
  if(TARGET hiredis::hiredis)
    set(_found ON)
  endif()
endif()
detinfer_optional_found(DETINFER_WITH_REDIS DETINFER_HAVE_REDIS _found "hiredis")

# The detinfer program (and the tools and tests that run it): CLI11 and cpp-httplib.
detinfer_optional(DETINFER_BUILD_CLI)
set(_found OFF)
if(NOT DETINFER_BUILD_CLI STREQUAL "OFF")
  find_package(CLI11 QUIET)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
  if(CLI11_FOUND AND HTTPLIB_FOUND)
    set(_found ON)
  endif()
endif()
detinfer_optional_found(DETINFER_BUILD_CLI DETINFER_HAVE_CLI _found "CLI11 and cpp-httplib")

# The Python package (python/, docs/python.md): pybind11 and the Python headers (Debian:
# pybind11-dev, python3-dev). The system Python (/usr/bin/python3) is preferred: Debian's
# pybind11, numpy and pytest are installed for it.
detinfer_optional(DETINFER_BUILD_PYTHON)
set(_found OFF)
if(NOT DETINFER_BUILD_PYTHON STREQUAL "OFF")
  if(NOT Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
    if(pybind11_FOUND)
      set(_found ON)
    endif()
  endif()
endif()
detinfer_optional_found(DETINFER_BUILD_PYTHON DETINFER_HAVE_PYTHON _found
  "pybind11 and the Python headers")

if(DETINFER_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DETINFER_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# CUDA: AUTO builds the CUDA kernels whenever nvcc is found.
set(DETINFER_HAVE_CUDA OFF)
if(NOT DETINFER_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(DETINFER_HAVE_CUDA ON)
  elseif(DETINFER_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DETINFER_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "detinfer: CUDA kernels ${DETINFER_HAVE_CUDA}")
