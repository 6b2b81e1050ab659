# Installs the main build into a scratch prefix, builds the consumer project against it, runs it.
# Inputs (-D): SRC consumer sources, BUILD main build tree, WORK scratch folder, GENERATOR, CXX compiler;
# optional CXX_FLAGS and LINK_FLAGS (the main build's).
foreach(var SRC BUILD WORK GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake needs -D${var}=...")
  endif()
endforeach()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
step("install" ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix")
step("configure consumer" ${CMAKE_COMMAND} -S "${SRC}" -B "${WORK}/build" -G "${GENERATOR}"
     -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${WORK}/prefix"
     # A sanitizer build's static library needs the same flags in whatever links it.
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
step("build consumer" ${CMAKE_COMMAND} --build "${WORK}/build")
step("run consumer" "${WORK}/build/consumer")
message(STATUS "consumer printed: ${step_output}")
if(NOT step_output MATCHES "dst 1 10 447 447")
  message(FATAL_ERROR "the consumer printed '${step_output}', expected the shape 1 10 447 447")
endif()
