# Flags for detinfer's own code. The numerics spec (docs/numerics.md) depends on
# -ffp-contract=off: the compiler must never fuse a multiply and an add on its own.
# -ffast-math (and anything that implies it) is forbidden.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()

add_library(detinfer_flags INTERFACE)
target_compile_options(detinfer_flags INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -ffp-contract=off -fno-fast-math>)
# This repository's code may still use DETINFER_DEPRECATED public API (export.h).
target_compile_definitions(detinfer_flags INTERFACE DETINFER_IN_TREE_BUILD)
if(DETINFER_WERROR)
  target_compile_options(detinfer_flags INTERFACE $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>)
endif()

string(TOLOWER "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_RELEASE}" _detinfer_all_flags)
if(_detinfer_all_flags MATCHES "fast-math|ffp-contract=fast|-ofast")
  message(FATAL_ERROR "detinfer must not be built with -ffast-math, -Ofast or -ffp-contract=fast")
endif()
