#!/bin/bash
# The ocloc binaries the XPU plugin embeds match the kernels it embeds: the
# text and SPIR-V modules it carries hash to what aot_compile.sh recorded when
# it compiled the binaries, and ocloc compiling the carried OpenCL C text
# again for each target, with the target's recorded options, gives each
# binary byte for byte (ocloc is deterministic).
# usage: test_xpu_aot_binaries.sh XPU_DUMP_EMBEDDED OCLOC
set -euo pipefail
dump=$1 ocloc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dump" "$work" > "$work/recorded.txt"
recorded() { awk -v key="$1" '$1 == key {print $2}' "$work/recorded.txt"; }
[ "$(sha256sum < "$work/source.cl" | cut -c1-64)" = "$(recorded source_sha256)" ] ||
  { echo "FAIL: the embedded OpenCL C text is not the one the binaries were compiled from"; exit 1; }
for module in module module_simd16; do
  key=${module/module/spirv}_sha256
  [ "$(sha256sum < "$work/$module.spv" | cut -c1-64)" = "$(recorded "$key")" ] ||
    { echo "FAIL: the embedded $module.spv is not the module ocloc compiled at build time"; exit 1; }
done
targets=$(awk '$1 == "targets" {$1 = ""; print}' "$work/recorded.txt")
[ -n "$targets" ] || { echo "FAIL: no ocloc binary embedded"; exit 1; }
for target in $targets; do
  options=$(awk -v t="$target" '$1 == "options" && $2 == t {$1 = ""; $2 = ""; sub(/^ +/, ""); print}' \
    "$work/recorded.txt")
  flags=(-file "$work/source.cl" -device "$target" -output "again_$target" -out_dir "$work")
  [ -n "$options" ] && flags+=(-options "$options")
  "$ocloc" compile "${flags[@]}" > "$work/ocloc_$target.log" 2>&1 ||
    { cat "$work/ocloc_$target.log"; exit 1; }
  if cmp -s "$work"/again_"$target"*.bin "$work/$target.bin"; then
    echo "$target: embedded binary = ocloc of the embedded OpenCL C text${options:+ with $options}" \
      "($(stat -c %s "$work/$target.bin") bytes)"
  else
    echo "FAIL: $target: the embedded binary differs from ocloc of the embedded OpenCL C text"; exit 1
  fi
done
