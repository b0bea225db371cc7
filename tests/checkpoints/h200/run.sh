#!/usr/bin/env bash
# Device run (H200 machine with torch, transformers, safetensors): builds the
# library and the checkpoint tests without GPU plugins, generates the
# checkpoints, runs transformers_names.py, then the conformance test on the
# files the safetensors package wrote. Dependencies (pkgconf, cmocka, cJSON)
# come unpacked in $DEPS. Logs and names.json go to $OUT.
set -u
DEPS=${DEPS:-/tmp/ckdeps}
export PATH=$DEPS/bin:$PATH PKG_CONFIG_PATH=$DEPS/pkgconfig LD_LIBRARY_PATH=$DEPS/lib
B=/tmp/build-ck
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DMOEINT4_HIP=OFF -DMOEINT4_XPU=OFF \
  -DMOEINT4_BUILD_CLI=OFF -DMOEINT4_WERROR=ON > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
cmake --build $B -j16 --target moeint4 test_checkpoints test_checkpoint_files > $OUT/build.log 2>&1 \
  || { tail -40 $OUT/build.log; exit 1; }
python3 tests/checkpoints/make_checkpoints.py /tmp/gen > $OUT/generate.log 2>&1 || { cat $OUT/generate.log; exit 1; }
python3 tests/checkpoints/h200/transformers_names.py $B/lib/libmoeint4.so /tmp/gen $OUT 2>&1 | tee $OUT/names.log | cut -c1-400
# the conformance test on the package-written files (expected/ folders copied along)
for d in /tmp/gen/*.expected; do cp -r $d $OUT/resaved/; done
$B/tests/checkpoints/test_checkpoints $OUT/resaved 2>&1 | tee $OUT/conformance_resaved.log
echo "conformance on safetensors-package files: exit ${PIPESTATUS[0]}"
$B/tests/checkpoints/test_checkpoints /tmp/gen > $OUT/conformance_generated.log 2>&1
echo "conformance on the generator's files: exit $?"
rm -rf $OUT/resaved
