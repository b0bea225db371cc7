#!/bin/bash
# Session 37, call 5 (carry ["build-hipdeps", "build-packs38"]; warm H100):
# main's head (build-h37) through the Python GPU tests (python_gpu's
# selection) with the lent machine's torch and pytest; exit 77 when any
# test skips (the two-GPU ones do on one GPU), as the ctest entry has it.
O=$OUT/s37c5
. bench/hip/device_call.sh build-packs38 h37 >/dev/null
export MOEINT4_LIBRARY=$PWD/build-h37/lib/libmoeint4.so MOEINT4_VECTORS_DIR=$PWD/tests/data/vllm
export MOEINT4_SKIPPED_CODE=77 PYTHONDONTWRITEBYTECODE=1
hip timeout 130 python3 -m pytest -q -rs -p no:cacheprovider tests/python -k "gpu or hip_backend" > $O/python_gpu.log 2>&1
echo "python_gpu exit $?" >> $O/python_gpu.log
tail -8 $O/python_gpu.log
tar czf $OUT/call5.tgz -C $O .
