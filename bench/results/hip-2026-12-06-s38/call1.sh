#!/bin/bash
# Session 38, call 1 (carry ["build-hipdeps", "build-packs38"]; build-h38 =
# main at 3f159e4 with its tests, build-h37 = 04af97c, the probes' base; the
# probe packs px, pd, pxd as in hip-2026-12-06-s37/call6.sh).
# On an H200: session 37's call 3 with main's head (the README's table in
# both weights modes, two rounds, then every HIP entry). On another card:
# session 37's call 6 (the routed decode's timing probes), then
# test_hip_forward_int4 at main's head (3f159e4 changed only that test's
# helper), as time allows.
d=bench/results/hip-2026-12-06-s37
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  sed 's/\bh37\b/h38/g; s/s37c3/s38c1/; s/call3.tgz/call1.tgz/' "$d/call3.sh" > /tmp/c.sh
  LIMIT=${LIMIT:-560} bash /tmp/c.sh
else
  sed 's/s37c6/s38c1/; s/call6.tgz/call1.tgz/; s/timeout 420/timeout 380/' "$d/call6.sh" > /tmp/c.sh
  bash /tmp/c.sh
  O=$OUT/s38c1t
  . bench/hip/device_call.sh build-packs38 h38
  t=$(( 585 - SECONDS ))
  [ $t -gt 60 ] && hip bash -c "cd build-h38 && timeout $t ctest --timeout $((t - 5)) -R '^test_hip_forward_int4$' --output-on-failure" > $O/tests.log 2>&1
  grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -4
  tar czf $OUT/call1t.tgz -C $O .
fi
