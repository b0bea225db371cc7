# Reliability builds (scripts/reliability.sh drives them):
#   MOEINT4_SANITIZE=address,undefined | thread | ""   sanitizer flags for every target
#   MOEINT4_FUZZ=ON             libFuzzer harnesses (tests/fuzz); needs clang
#   MOEINT4_FAULT_INJECTION=ON  allocation-failure hook in src/base/alloc.c (tests/faults)
# Included by the top-level CMakeLists.txt before any target is defined, so
# the flags reach the library, the plugins and the tests alike.

if(MOEINT4_SANITIZE)
  # One failure stops the program: a sanitizer report is a test failure.
  set(mi4_sanitize_flags -fsanitize=${MOEINT4_SANITIZE} -fno-sanitize-recover=all
    -fno-omit-frame-pointer -g)
  add_compile_options(${mi4_sanitize_flags})
  add_link_options(-fsanitize=${MOEINT4_SANITIZE})
  # gcc links its sanitizer runtimes into shared objects too, so
  # libmoeint4.so keeps linking with -Wl,--no-undefined; with clang build
  # only executables (the fuzz build builds the harness targets alone).
endif()

if(MOEINT4_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MOEINT4_FUZZ=ON needs clang (libFuzzer), e.g. -DCMAKE_C_COMPILER=clang-15")
  endif()
  # Coverage feedback for the library too; the harnesses add -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(MOEINT4_FAULT_INJECTION)
  add_compile_definitions(MOEINT4_FAULT_INJECTION=1)
endif()
