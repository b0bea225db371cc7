cmake_minimum_required(VERSION 3.25)
# cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DGENERATOR=...
#       -DC_COMPILER=... -DVERSION=... -P install_consumer.cmake
# Installs the build into a fresh prefix, then builds and runs a consumer
# twice: with find_package(moeint4 CONFIG) and with pkg-config.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 1. CMake package config.
run_step("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer
  -G ${GENERATOR} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DEXPECTED_PREFIX=${prefix} -DEXPECTED_VERSION=${VERSION})
run_step("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run_step("running the consumer (find_package)" ${WORK_DIR}/consumer/consumer)
message(STATUS "find_package consumer: ${step_output}")

# 2. pkg-config, seeing only the installed prefix.
file(GLOB_RECURSE pc_files ${prefix}/*/moeint4.pc)
list(LENGTH pc_files pc_count)
if(NOT pc_count EQUAL 1)
  message(FATAL_ERROR "expected one installed moeint4.pc, found: ${pc_files}")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
set(ENV{PKG_CONFIG_LIBDIR} ${pc_dir})
set(ENV{PKG_CONFIG_PATH} "")
run_step("pkg-config --modversion" pkg-config --modversion moeint4)
string(STRIP "${step_output}" pc_version)
if(NOT pc_version STREQUAL VERSION)
  message(FATAL_ERROR "pkg-config says version ${pc_version}, expected ${VERSION}")
endif()
run_step("pkg-config --cflags --libs" pkg-config --cflags --libs moeint4)
separate_arguments(pc_flags UNIX_COMMAND "${step_output}")
run_step("pkg-config --variable=libdir" pkg-config --variable=libdir moeint4)
string(STRIP "${step_output}" pc_libdir)
run_step("compiling with pkg-config flags" ${C_COMPILER} ${CONSUMER_DIR}/main.c ${pc_flags}
  -Wl,-rpath,${pc_libdir} -o ${WORK_DIR}/consumer_pkg_config)
run_step("running the consumer (pkg-config)" ${WORK_DIR}/consumer_pkg_config)
message(STATUS "pkg-config consumer: ${step_output}")
