# Build facts recorded in `detinfer env` and, later, in every run fingerprint.
# -DDETINFER_GIT_REVISION=<rev> gives the revision when the sources are not a git checkout
# (deploy/Dockerfile: the image's build context has no .git).
if(NOT DETINFER_GIT_REVISION)
  execute_process(COMMAND git rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE DETINFER_GIT_REVISION
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _git_rc)
  if(NOT _git_rc EQUAL 0 OR DETINFER_GIT_REVISION STREQUAL "")
    set(DETINFER_GIT_REVISION "unknown")
  endif()
  execute_process(COMMAND git status --porcelain --untracked-files=no
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _git_dirty ERROR_QUIET)
  if(NOT _git_dirty STREQUAL "")
    set(DETINFER_GIT_REVISION "${DETINFER_GIT_REVISION}-dirty")
  endif()
endif()
string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
set(DETINFER_BUILD_FLAGS "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_bt}} -ffp-contract=off -fno-fast-math")
string(STRIP "${DETINFER_BUILD_FLAGS}" DETINFER_BUILD_FLAGS)
set(DETINFER_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
set(DETINFER_TORCH_VERSION "${Torch_VERSION}")
if(NOT DETINFER_HAVE_TORCH)
  set(DETINFER_TORCH_VERSION "none")  # built with DETINFER_WITH_TORCH=OFF (or not found)
elseif(DETINFER_TORCH_VERSION STREQUAL "")
  set(DETINFER_TORCH_VERSION "unknown")
endif()
if(DETINFER_HAVE_CUDA)
  set(DETINFER_CUDA_BOOL true)
else()
  set(DETINFER_CUDA_BOOL false)
endif()
set(DETINFER_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
configure_file(${PROJECT_SOURCE_DIR}/include/detinfer/version.h.in
  ${DETINFER_GENERATED_DIR}/include/detinfer/version.h @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/src/core/build_info.cpp.in
  ${DETINFER_GENERATED_DIR}/src/build_info.cpp @ONLY)
