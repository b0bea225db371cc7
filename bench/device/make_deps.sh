#!/bin/bash
# shellcheck disable=SC2016 # ${prefix} belongs to the .pc files, unexpanded
# Packs the Debian libraries a device call needs into DIR/deps.tar.xz: the
# lent GPU machine has none of them and nothing can be installed there, so
# they travel in the call's `carry` (the folder is ignored by git).
#   bash bench/device/make_deps.sh hip build-hipdeps  # bench/hip/h200_run.sh, ab_bench.sh
#   bash bench/device/make_deps.sh xpu build-xpudeps  # bench/xpu/h200_run.sh
# hip: what the build there links (cmocka, OpenBLAS, cJSON: headers,
# libraries and .pc files under prefix /tmp/hipdeps, where
# bench/hip/nvidia_build.sh unpacks them) and pkg-config itself.
# xpu: only run-time libraries; the build is made here (bench/xpu/README.md).
# `ldd` of the binaries that run there lists what the image lacks.
set -euo pipefail
kind=$1 dir=$2
lib=/usr/lib/x86_64-linux-gnu
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/lib"
pc() { # name version libs cflags: a .pc file relative to /tmp/hipdeps
  printf 'prefix=/tmp/hipdeps\nName: %s\nDescription: %s\nVersion: %s\nLibs: -L${prefix}/lib %s\nCflags: %s\n' \
    "$1" "$1" "$2" "$3" "$4" > "$root/pkgconfig/$1.pc"
}
case $kind in
hip)
  mkdir -p "$root"/{include/cjson,bin,pkgconfig}
  cp -L $lib/libcmocka.so.0 $lib/openblas-pthread/libopenblas.so.0 $lib/libcjson.so.1 \
    $lib/libgfortran.so.5 $lib/libquadmath.so.0 $lib/libpkgconf.so.3 "$root/lib/"
  for name in cmocka openblas cjson; do
    so=$(cd "$root/lib" && ls lib$name.so.*)
    ln -s "$so" "$root/lib/lib$name.so"
  done
  cp /usr/include/cmocka*.h /usr/include/x86_64-linux-gnu/openblas-pthread/*.h "$root/include/"
  cp /usr/include/cjson/cJSON.h "$root/include/cjson/"
  cp /usr/bin/pkgconf "$root/bin/" && ln -s pkgconf "$root/bin/pkg-config"
  pc cmocka "$(pkg-config --modversion cmocka)" -lcmocka '-I${prefix}/include'
  pc openblas "$(pkg-config --modversion openblas)" -lopenblas '-I${prefix}/include'
  pc libcjson "$(pkg-config --modversion libcjson)" -lcjson '-I${prefix}/include -I${prefix}/include/cjson'
  ;;
xpu)
  cp -L $lib/libOpenCL.so.1 $lib/libcmocka.so.0 $lib/libcjson.so.1 $lib/libdnnl.so.2 \
    $lib/libgomp.so.1 $lib/openblas-pthread/libopenblas.so.0 $lib/libgfortran.so.5 \
    $lib/libquadmath.so.0 "$root/lib/"
  ;;
*)
  echo "make_deps.sh: kind must be hip or xpu, not '$kind'" >&2
  exit 2
  ;;
esac
mkdir -p "$dir"
tar cf - -C "$root" . | xz -T2 -6 > "$dir/deps.tar.xz"
ls -l "$dir/deps.tar.xz"
