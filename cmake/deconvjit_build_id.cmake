# cmake -DSRC=<source dir> -DOUT=<header> -P deconvjit_build_id.cmake
# Writes OUT defining DECONVJIT_BUILD_ID, a hash of every library source. The on-disk kernel cache rejects
# entries written by a build with another id, so code cached before an emitter change is never loaded
# after it, even though version() did not change. OUT is rewritten only when the id changes.
file(GLOB_RECURSE files ${SRC}/runtime/* ${SRC}/jit/* ${SRC}/include/*)
list(SORT files)
set(all "")
foreach(f IN LISTS files)
  file(SHA256 ${f} h)
  string(APPEND all "${h}")
endforeach()
string(SHA256 id "${all}")
string(SUBSTRING "${id}" 0 16 id)
set(text "#define DECONVJIT_BUILD_ID \"${id}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
