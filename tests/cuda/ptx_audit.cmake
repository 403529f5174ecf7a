# PTX audit (ctest cuda_ptx_audit, runs without a GPU): compiles each CUDA kernel source to
# PTX with the build's numerics flags and fails if any approximate (.approx) or
# flush-to-zero (.ftz) instruction appears, i.e. if a fast-math intrinsic (__expf,
# __fdividef, ...) or flag slipped into the kernels. Fused multiply-adds are not audited
# here (the kernels write them explicitly); the GPU tests check the bits.
# Inputs: NVCC, SOURCES (;-list, passed with | separators), FLAGS (| separated), INCLUDES
# (| separated), WORK (scratch folder).
string(REPLACE "|" ";" sources "${SOURCES}")
string(REPLACE "|" ";" flags "${FLAGS}")
string(REPLACE "|" ";" includes "${INCLUDES}")
set(include_args "")
foreach(dir ${includes})
  list(APPEND include_args "-I${dir}")
endforeach()
file(MAKE_DIRECTORY "${WORK}")
set(bad 0)
foreach(src ${sources})
  get_filename_component(name "${src}" NAME_WE)
  set(ptx "${WORK}/${name}.ptx")
  execute_process(
    COMMAND "${NVCC}" -ptx -std=c++17 -O3 -arch=sm_90a ${flags} ${include_args} "${src}" -o "${ptx}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc -ptx failed for ${src}:\n${err}")
  endif()
  file(STRINGS "${ptx}" hits REGEX "\\.approx|\\.ftz")
  list(LENGTH hits n)
  file(STRINGS "${ptx}" fmas REGEX "fma\\.rn\\.f32")
  list(LENGTH fmas nfma)
  message(STATUS "${name}.cu: ${nfma} fma.rn.f32, ${n} approximate/ftz instructions")
  if(n GREATER 0)
    list(GET hits 0 first)
    message(SEND_ERROR "${name}.cu has approximate or flush-to-zero PTX, e.g.: ${first}")
    set(bad 1)
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "PTX audit failed")
endif()
message(STATUS "PTX audit passed")
