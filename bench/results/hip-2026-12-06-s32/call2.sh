#!/bin/bash
# Session 32, call 2 (carry ["build-hipdeps", "build-packs32"]): the GPU-only
# CI entries that call 1 left out, on the same build of main (5f048fe):
# python_gpu (CUDA tensors on the caller's stream, both weights modes,
# torch.compile fullgraph and reduce-overhead, CUDA graph capture and
# replay; the two-GPU tests skip on one GPU), python_torch_compile
# (torch.compile of the op on the CPU: Debian's torch 1.13 has none, the
# lent machine's torch 2.11 has it) and cli_device_hip (the moeint4 command
# on the HIP backend), with the pytest and cmake of the lent machine: the
# ctest entries name Debian's /usr/bin/python3 and /usr/bin/cmake.
O=$OUT/s32c2
. bench/hip/device_call.sh build-packs32 main32
export MOEINT4_LIBRARY=$PWD/build-main32/lib/libmoeint4.so MOEINT4_VECTORS_DIR=$PWD/tests/data/vllm
export MOEINT4_SKIPPED_CODE=77 PYTHONDONTWRITEBYTECODE=1
python3 -c "import torch, numpy, pytest; print('torch', torch.__version__, 'numpy', numpy.__version__, 'pytest', pytest.__version__)" > $O/python-env.txt 2>&1
hip timeout 240 python3 -m pytest -q -rs -p no:cacheprovider tests/python -k "gpu or hip_backend" > $O/python_gpu.log 2>&1
echo "python_gpu exit $?" >> $O/python_gpu.log
hip timeout 150 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_torch.py \
  tests/python/test_torch_op.py tests/python/test_expert_parallel.py \
  -k "compile and not (gpu or hip_backend)" > $O/python_torch_compile.log 2>&1
echo "python_torch_compile exit $?" >> $O/python_torch_compile.log
cm=$(command -v cmake || python3 -c "import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, 'cmake'))" 2>/dev/null)
if [ -n "$cm" ]; then
  hip env -u MOEINT4_BACKEND timeout 200 "$cm" -DMOEINT4_CLI=$PWD/build-main32/bin/moeint4 -DMODE=device \
    -DDEVICE_BACKEND=hip -DWORK_DIR=/tmp/cli_device_hip -P tests/cli/cli_test.cmake > $O/cli_device_hip.log 2>&1
  echo "cli_device_hip ($cm) exit $?" >> $O/cli_device_hip.log
else
  echo "no cmake on this machine: cli_device_hip not run" > $O/cli_device_hip.log
fi
cat $O/python-env.txt; tail -12 $O/python_gpu.log; tail -6 $O/python_torch_compile.log; tail -8 $O/cli_device_hip.log
tar czf $OUT/call2.tgz -C $O .
