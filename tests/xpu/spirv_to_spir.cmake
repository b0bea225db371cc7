# The backend's SPIR-V module as a SPIR 1.2 program that PoCL 3.1 can build
# (cl_khr_spir; it cannot ingest SPIR-V): translated back to LLVM IR by
# llvm-spirv, then the OpenCL builtins the module calls on generic pointers
# (vload_half, vload4, vstore_half_rte: `PU3AS4` in their mangled names)
# renamed to PoCL's flat-pointer overloads (`P`), which on its CPU device
# are the same pointers; then optimized (opt -O2), as a driver's compiler
# optimizes the SPIR-V it is given: PoCL's SPIR path computes wrong results
# on -O0 code, even clang's own from the OpenCL C text, and right ones on
# optimized code (the module is only inlined and its private arrays
# promoted: src/backends/xpu/spirv_module.cmake).
# Nothing else is touched: the kernels PoCL runs are the SPIR-V module's.
# cmake -DLLVM_SPIRV=... -DLLVM_DIS=... -DLLVM_AS=... -DLLVM_OPT=...
#       -DSPIRV=in.spv -DOUTPUT=out.bc -P this
execute_process(COMMAND ${LLVM_SPIRV} -r ${SPIRV} -o ${OUTPUT}.reverse.bc RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llvm-spirv -r failed on ${SPIRV}")
endif()
execute_process(COMMAND ${LLVM_DIS} ${OUTPUT}.reverse.bc -o ${OUTPUT}.reverse.ll RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llvm-dis failed")
endif()
file(READ ${OUTPUT}.reverse.ll ir)
string(REGEX MATCHALL "@_Z[A-Za-z0-9_]*PU3AS4[A-Za-z0-9_]*" generic_calls "${ir}")
list(REMOVE_DUPLICATES generic_calls)
string(REGEX REPLACE "(@_Z[A-Za-z0-9_]*)PU3AS4" "\\1P" ir "${ir}")
file(WRITE ${OUTPUT}.ll "${ir}")
execute_process(COMMAND ${LLVM_AS} ${OUTPUT}.ll -o ${OUTPUT}.renamed.bc RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llvm-as failed")
endif()
# (its remarks on `#pragma unroll` loops it could not unroll are not errors)
execute_process(COMMAND ${LLVM_OPT} -O2 ${OUTPUT}.renamed.bc -o ${OUTPUT} RESULT_VARIABLE rc
                ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "opt -O2 failed")
endif()
list(LENGTH generic_calls count)
message(STATUS "SPIR for PoCL: ${count} builtins on generic pointers renamed: ${generic_calls}")
