#!/usr/bin/env python3
"""Markdown table of a hip_bench.py JSON (for bench/results/hip-<date>.md)."""
import json
import sys

records = json.load(open(sys.argv[1]))
print("| preset | M | ours ms | host call ms | floor ms | ours/floor | torch loop ms "
      "| torch _grouped_mm ms | best torch / ours | GB/s | TFLOP/s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in records:
    grouped = r.get("baseline_grouped_ms")
    host = r.get("host_call_ms")
    host = f"{host:.3f}" if host is not None else "-"
    print(f"| {r['preset']} | {r['M']} | {r['median_ms']:.3f} | {host} | {r['floor_ms']:.3f} "
          f"| {r['ratio_to_floor']:.2f}x | {r['baseline_loop_ms']:.3f} "
          f"| {grouped:.3f} | {r['speedup_vs_baseline']:.2f} "
          f"| {r['gbps']:.0f} | {r['tflops']:.1f} |"
          if grouped is not None else
          f"| {r['preset']} | {r['M']} | {r['median_ms']:.3f} | {host} | {r['floor_ms']:.3f} "
          f"| {r['ratio_to_floor']:.2f}x | {r['baseline_loop_ms']:.3f} | - "
          f"| {r['speedup_vs_baseline']:.2f} | {r['gbps']:.0f} | {r['tflops']:.1f} |")
