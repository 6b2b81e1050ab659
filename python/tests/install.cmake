# Installs the build into a scratch prefix and imports the module from where `cmake --install` put it,
# not from the build tree. Inputs (-D): BUILD build tree, WORK scratch folder, PYTHON interpreter,
# SITE the install folder relative to the prefix.
foreach(var BUILD WORK PYTHON SITE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}"
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
set(check "import sys, deconvjit; assert deconvjit.__file__.startswith(sys.argv[1]), deconvjit.__file__; \
print(deconvjit.__file__, deconvjit.shape('{\"src\":[1,2,3],\"weights\":[2,4,3]}')['dst'])")
execute_process(COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${WORK}/${SITE}" "${PYTHON}" -c "${check}"
  "${WORK}/${SITE}/" WORKING_DIRECTORY "${WORK}"  # not the build tree: `-c` puts the cwd on sys.path
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\[1, 4, 5\\]")
  message(FATAL_ERROR "importing the installed module failed (${rc}): ${out}${err}")
endif()
message(STATUS "installed and imported: ${out}")
