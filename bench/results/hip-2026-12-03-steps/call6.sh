#!/bin/bash
# Device call 6 of 2026-12-03: the HIP tests on HEAD's build (the routed
# grid change), and the graph-replay test three times each on HEAD and on
# the staged-sums build that failed it in call 5 (a race, or the sums?).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o6
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o6/tests-head.log 2>&1
tail -4 /tmp/o6/tests-head.log
# both trees were built as /work/main/build-nvt (paths in ctest files and
# run paths): the one to run is moved there
mv build-nvt build-nvt-head
for i in 1 2 3; do
  for b in head sums; do
    mv build-nvt-$b build-nvt
    (cd build-nvt && ctest -R '^test_hip_graph_int4$' --output-on-failure) > /tmp/o6/graph-$b-$i.log 2>&1
    echo "$b run $i: $(grep -E 'replays|tests passed' /tmp/o6/graph-$b-$i.log | tr '\n' ' ')"
    mv build-nvt build-nvt-$b
  done
done
tar czf "$OUT/call6.tgz" -C /tmp/o6 .
