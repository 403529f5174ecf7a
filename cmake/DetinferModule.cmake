# detinfer_add_module(NAME [NOT_IN_LIBRARY] SOURCES ... [DEPS ...] [LIBS ...])
#   One library per src/ module, built as an OBJECT library so that the shared
#   library, the static library and each module's tests can take exactly the objects
#   they need (a kernels test never compiles the model or links libtorch).
#   DEPS: other detinfer modules this one uses (dependencies point one way).
#   LIBS: third-party targets.
#   NOT_IN_LIBRARY: not part of libdetinfer (src/devtools); linked by programs that ask.
set_property(GLOBAL PROPERTY DETINFER_MODULES "")
function(detinfer_add_module name)
  cmake_parse_arguments(ARG "NOT_IN_LIBRARY" "" "SOURCES;DEPS;LIBS" ${ARGN})
  set(target detinfer_${name})
  add_library(${target} OBJECT ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${DETINFER_GENERATED_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  target_compile_definitions(${target} PRIVATE DETINFER_BUILDING_LIBRARY)
  target_link_libraries(${target} PRIVATE detinfer_flags)
  foreach(dep ${ARG_DEPS})
    target_link_libraries(${target} PUBLIC detinfer_${dep})
  endforeach()
  if(ARG_LIBS)
    target_link_libraries(${target} PUBLIC ${ARG_LIBS})
  endif()
  if(NOT ARG_NOT_IN_LIBRARY)
    set_property(GLOBAL APPEND PROPERTY DETINFER_MODULES ${name})
  endif()
  set_property(TARGET ${target} PROPERTY DETINFER_DEPS "${ARG_DEPS}")
endfunction()

# Collects the objects of a module and of every module it depends on (transitively),
# because object libraries only hand their objects to direct consumers.
function(detinfer_module_closure out)
  set(result "")
  set(queue ${ARGN})
  while(queue)
    list(POP_FRONT queue m)
    if(NOT m IN_LIST result)
      list(APPEND result ${m})
      get_property(deps TARGET detinfer_${m} PROPERTY DETINFER_DEPS)
      list(APPEND queue ${deps})
    endif()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# detinfer_link_modules(TARGET module...): links the objects of the modules and their
# dependencies into an executable or library.
function(detinfer_link_modules target)
  detinfer_module_closure(mods ${ARGN})
  foreach(m ${mods})
    target_link_libraries(${target} PRIVATE detinfer_${m})
  endforeach()
endfunction()

# detinfer_add_test(NAME SOURCES ... MODULES ... [LIBS ...] [LABELS ...])
#   A GoogleTest program linked against the listed modules only; registered with ctest.
function(detinfer_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;MODULES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE detinfer_flags GTest::gtest GTest::gmock GTest::gtest_main
    Threads::Threads ${ARG_LIBS})
  # DETINFER_TEST_WITH_TORCH / _REDIS: 1 when the library has the fast mode / Redis tiers
  # (tests of those skip with the reason otherwise, and check the kUnsupported error).
  target_compile_definitions(${name} PRIVATE
    DETINFER_SOURCE_DIR="${PROJECT_SOURCE_DIR}" DETINFER_BINARY_DIR="${PROJECT_BINARY_DIR}"
    DETINFER_TEST_WITH_TORCH=$<BOOL:${DETINFER_HAVE_TORCH}>
    DETINFER_TEST_WITH_REDIS=$<BOOL:${DETINFER_HAVE_REDIS}>)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  detinfer_link_modules(${name} ${ARG_MODULES})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set(_env "DETINFER_TEST_TMP=${PROJECT_BINARY_DIR}/test-tmp")
  if(TARGET detinfer_cli)
    list(APPEND _env "DETINFER_CLI=$<TARGET_FILE:detinfer_cli>")
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${_env}")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
