# Runs examples/generate.cpp twice on the same model and prompt: both runs succeed, print a
# digest line, and print the same bits.
foreach(run 1 2)
  execute_process(COMMAND ${PROGRAM} ${MODEL} "The quick brown fox"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out${run} ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run ${run} exited ${rc}: ${err}")
  endif()
  if(NOT out${run} MATCHES "\ndigest [0-9]+\n$")
    message(FATAL_ERROR "run ${run} printed no digest line: ${out${run}}")
  endif()
endforeach()
if(NOT out1 STREQUAL out2)
  message(FATAL_ERROR "two runs differ:\n${out1}\n---\n${out2}")
endif()
# A missing model folder is a clear error (exit 1), not a crash.
execute_process(COMMAND ${PROGRAM} ${MODEL}-missing RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "error: ")
  message(FATAL_ERROR "missing model: exit ${rc}, stderr: ${err}")
endif()
