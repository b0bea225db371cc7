#!/bin/bash
# Sourced by a device-call script (bench/results/*/callN.sh) on the lent GPU:
#   . bench/hip/device_call.sh PACK_DIR NAME...
# links /work/main to this tree (the packs' absolute paths), unpacks
# PACK_DIR/NAME.tar.xz for each NAME (build-NAME), writes the GPU's name and
# driver to $O/gpu.txt ($O: the call's output folder, set before) and defines
# hip CMD...: CMD with the carried HIP deps (build-hipdeps) on the paths;
# left: the seconds left of CALL_LIMIT (default 570, at most what the tool
# grants); step_limit SLACK: a step's timeout that leaves SLACK seconds for
# the steps after it, at least 30 (timeout takes no negative limit, and 0
# would mean none).
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
device_call_packs=$1
shift
for p in "$@"; do tar xJf "$device_call_packs/$p.tar.xz"; done
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$O/gpu.txt" 2>&1
cat "$O/gpu.txt"
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
left() { echo $(( ${CALL_LIMIT:-570} - SECONDS )); }
step_limit() { local t=$(( $(left) - $1 )); echo $(( t < 30 ? 30 : t )); }
