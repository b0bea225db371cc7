#!/bin/bash
# Prepared in session 37 for the next session, not run (carry
# ["build-hipdeps", "build-packs38"]): on an H200 call 3 (the README's table
# at main's head, then every HIP entry) within LIMIT seconds; on other cards
# call 6 (the routed decode's timing probes, all SMs and 66), which an H200
# session can run as a second call.
d=$(dirname "$0")
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=${LIMIT:-560} bash "$d/call3.sh"
else
  bash "$d/call6.sh"
fi
