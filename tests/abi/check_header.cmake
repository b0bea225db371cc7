cmake_minimum_required(VERSION 3.25)
# cmake -DHEADER_DIR=<include> -DC_COMPILER=<cc> [-DCXX_COMPILER=<c++>] -DNM=<nm>
#       -DWORK_DIR=<dir> -P check_header.cmake
# include/moeint4.h stands alone: it compiles on its own, warning-free, as
# C99 and C11 with -pedantic, and as C++ (engines are mostly C++), where its
# functions must have C linkage.
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/only_header.c "#include <moeint4.h>\nint moeint4_header_check(void);\nint moeint4_header_check(void) { return MOEINT4_VERSION_NUMBER; }\n")
file(WRITE ${WORK_DIR}/only_header.cpp "#include <moeint4.h>\nextern \"C\" unsigned (*moeint4_header_check)(void);\nunsigned (*moeint4_header_check)(void) = moeint4_version;\n")

function(compile what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "moeint4.h does not compile ${what}:\n${ARGN}\n${out}${err}")
  endif()
  message(STATUS "moeint4.h compiles ${what}")
endfunction()

foreach(standard IN ITEMS c99 c11)
  compile("as ${standard}" ${C_COMPILER} -std=${standard} -pedantic -Wall -Wextra -Werror
    -I${HEADER_DIR} -c ${WORK_DIR}/only_header.c -o ${WORK_DIR}/only_header_${standard}.o)
endforeach()
if(CXX_COMPILER)
  compile("as C++11" ${CXX_COMPILER} -std=c++11 -pedantic -Wall -Wextra -Werror -I${HEADER_DIR}
    -c ${WORK_DIR}/only_header.cpp -o ${WORK_DIR}/only_header_cxx.o)
  # C linkage: the C++ object refers to the plain (unmangled) name.
  execute_process(COMMAND ${NM} -u ${WORK_DIR}/only_header_cxx.o OUTPUT_VARIABLE undefined)
  if(NOT undefined MATCHES "(^|\n| )moeint4_version(\n|$)")
    message(FATAL_ERROR "moeint4_version has C++ linkage in C++ (no extern \"C\"?):\n${undefined}")
  endif()
else()
  message(STATUS "no C++ compiler found: the C++ check is not run")
endif()

# include/moeint4_backend.h (the backend author's header) stands alone too,
# header-only kit included: C99, C11 and C++11, warning-free, C linkage.
file(WRITE ${WORK_DIR}/only_backend_header.c "#include <moeint4_backend.h>\nint moeint4_header_check(const moeint4_weights_desc *d, char *err);\nint moeint4_header_check(const moeint4_weights_desc *d, char *err) { moeint4_quant_matrix m = moeint4_desc_w13(d); return (int)moeint4_backend_fail(err, 8, MOEINT4_BACKEND_API_VERSION, \"%d\", m.group_size); }\n")
file(WRITE ${WORK_DIR}/only_backend_header.cpp "#include <moeint4_backend.h>\nextern \"C\" moeint4_status (*moeint4_header_check)(const char *, moeint4_backend *);\nmoeint4_status (*moeint4_header_check)(const char *, moeint4_backend *) = moeint4_backend_load;\n")
foreach(standard IN ITEMS c99 c11)
  compile("(moeint4_backend.h) as ${standard}" ${C_COMPILER} -std=${standard} -pedantic -Wall
    -Wextra -Werror -I${HEADER_DIR} -c ${WORK_DIR}/only_backend_header.c
    -o ${WORK_DIR}/only_backend_header_${standard}.o)
endforeach()
if(CXX_COMPILER)
  compile("(moeint4_backend.h) as C++11" ${CXX_COMPILER} -std=c++11 -pedantic -Wall -Wextra
    -Werror -I${HEADER_DIR} -c ${WORK_DIR}/only_backend_header.cpp
    -o ${WORK_DIR}/only_backend_header_cxx.o)
  execute_process(COMMAND ${NM} -u ${WORK_DIR}/only_backend_header_cxx.o OUTPUT_VARIABLE undefined)
  if(NOT undefined MATCHES "(^|\n| )moeint4_backend_load(\n|$)")
    message(FATAL_ERROR "moeint4_backend_load has C++ linkage in C++ (no extern \"C\"?):\n${undefined}")
  endif()
endif()
