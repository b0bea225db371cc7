# The XPU kernels as the SPIR-V module the Level Zero runtime loads:
# clang's unoptimized LLVM IR of the OpenCL C text, with the `noinline`
# that -O0 puts on every function dropped, then inlined and its private
# arrays and structs promoted to values (opt: inline, sroa, early-cse,
# instcombine), translated by llvm-spirv and validated by spirv-val.
# Why not -O0: Intel's compiler (IGC) spilled 600-4200 bytes a thread in 12
# kernels of the -O0 module (ocloc, acm-g10), none of which spill from the
# OpenCL C text or from this module. Why not -O2: its CFG passes lay out
# blocks before their dominators and emit `freeze`, which llvm-spirv 15
# translates into modules spirv-val rejects or cannot translate at all.
# DEFINES (optional): preprocessor definitions, e.g. "-DMI4_SUB_GROUP_SIZE=16".
# cmake -DCLANG=... -DLLVM_DIS=... -DLLVM_AS=... -DLLVM_OPT=... -DLLVM_SPIRV=...
#       -DSPIRV_VAL=... -DSOURCE=in.cl -DOUTPUT=out.spv [-DDEFINES=...] -P this
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "SPIR-V module: ${step} failed")
  endif()
endfunction()
separate_arguments(defines UNIX_COMMAND "${DEFINES}")
run("clang" ${CLANG} -cl-std=CL2.0 -target spir64 -O0 -Xclang -disable-O0-optnone
    -Xclang -finclude-default-header ${defines} -emit-llvm -c ${SOURCE} -o ${OUTPUT}.O0.bc)
run("llvm-dis" ${LLVM_DIS} ${OUTPUT}.O0.bc -o ${OUTPUT}.O0.ll)
file(READ ${OUTPUT}.O0.ll ir)
# attribute groups: `attributes #N = { convergent noinline nounwind ... }`
string(REGEX REPLACE "(\nattributes #[0-9]+ = {[^}\n]*) noinline" "\\1" ir "${ir}")
file(WRITE ${OUTPUT}.inline.ll "${ir}")
run("llvm-as" ${LLVM_AS} ${OUTPUT}.inline.ll -o ${OUTPUT}.inline.bc)
run("opt" ${LLVM_OPT} "-passes=cgscc(inline),function(sroa,early-cse,instcombine)"
    ${OUTPUT}.inline.bc -o ${OUTPUT}.bc)
run("llvm-spirv" ${LLVM_SPIRV} ${OUTPUT}.bc -o ${OUTPUT})
run("spirv-val" ${SPIRV_VAL} ${OUTPUT})
