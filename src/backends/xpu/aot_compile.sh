#!/bin/bash
# Build step: Intel's offline compiler (ocloc, IGC) compiles the XPU kernels
# for each Intel GPU target, from the OpenCL C text (what the OpenCL runtime
# builds) and from the SPIR-V module (what the Level Zero runtime loads).
# Any compile error fails the build. Writes OUTDIR/<target>.bin (compiled
# from the SPIR-V; the plugin embeds them) and prints, per target, input and
# kernel, what IGC reports: SIMD width, registers (GRF) per thread, spill
# and private memory bytes per thread, for every variant IGC compiled (from
# its shader dump: SIMD widths it tried; "retry" marks a second compilation
# IGC made after the first spilled too much).
# usage: aot_compile.sh OCLOC SOURCE.cl MODULE.spv OUTDIR TARGET...
set -euo pipefail
ocloc=$1 source=$2 module=$3 outdir=$4
shift 4
mkdir -p "$outdir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

report() { # dump dir -> one line per kernel, every variant IGC compiled
  local dump=$1 f name pass simd grf spill private
  for f in "$dump"/*_simd*_entry_*.asm; do
    name=$(grep -m1 -o '^\.kernel "[A-Za-z0-9_]*"' "${f%.asm}.visaasm" | cut -d'"' -f2)
    pass=; [[ $(basename "$f") == *_1_simd* ]] && pass=" retry"
    simd=$(basename "$f" | sed -E 's/.*_simd([0-9]+)_entry.*/\1/')
    grf=$(grep -m1 -o 'numGRF=[0-9]*' "$f" | cut -d= -f2 || true)
    spill=$(grep -m1 -o 'spill size [0-9]*' "$f" | awk '{print $3}' || true)
    private=$(grep -m1 -o 'private memory size [0-9]*' "$f" | awk '{print $4}' || true)
    echo "$name simd$simd$pass: grf ${grf:-?} spill ${spill:-0} private ${private:-0}"
  done | sort | awk -F': ' '{ if ($1 ~ /^[^ ]+ /) { split($1, a, " "); k = a[1]; v = substr($1, length(k) + 2) }
                              line[k] = line[k] (line[k] == "" ? "" : " | ") v " " $2 }
                            END { for (k in line) printf "  %-18s %s\n", k, line[k] }' | sort
}

compile() { # target input kind -> binary in $work/<kind>_<target>
  local target=$1 input=$2 kind=$3 log
  local dump="$work/dump_${kind}_$target"
  local flags=(-file "$input" -device "$target" -output "${kind}_$target" -out_dir "$work")
  [ "$kind" = spirv ] && flags+=(-spirv_input)
  mkdir -p "$dump"
  if ! log=$(IGC_ShaderDumpEnable=1 IGC_DumpToCustomDir="$dump" "$ocloc" compile "${flags[@]}" 2>&1); then
    echo "ocloc: compiling the XPU kernels ($kind) for $target FAILED:" >&2
    echo "$log" >&2
    exit 1
  fi
  echo "ocloc $target from $kind: ok"
  report "$dump"
}

for target in "$@"; do
  compile "$target" "$source" opencl_c
  compile "$target" "$module" spirv
  cp "$work"/spirv_"$target"*.bin "$outdir/$target.bin"
done
