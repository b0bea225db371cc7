#!/usr/bin/env python3
"""Merges `moeint4 bench` JSON files into one and writes the markdown table.

usage: cpu_report.py OUT.json OUT.md 'COMMAND' RUN1.json ['COMMAND' RUN2.json ...]
Standard library only (json); run by bench/run_cpu.sh.
"""
import json
import os
import platform
import sys

# The CPU bench targets, same-run ratios: (preset, format, M) -> max time / floor
FLOOR_TARGETS = [
    ("qwen3-30b-a3b", "gptq-sym", 1, 1.15),
    ("mixtral-8x7b", "gptq-sym", 1, 1.15),
    ("qwen3-30b-a3b", "gptq-sym", 8, 1.3),
    ("mixtral-8x7b", "gptq-sym", 8, 1.3),
]
# (preset, format, M) -> min share of the compute ceiling of the kernel's instruction
CEILING_TARGETS = [("qwen3-30b-a3b", "gptq-sym", 512, 0.45)]
# decode steadiness: the slowest timed forward within this factor of the median at M = 1
STEADY_MAX_OVER_MEDIAN = 1.5
MIN_SPEEDUP = 2.0


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def cpu_model():
    """Model name, family/model numbers and the SIMD flags the kernels care about."""
    fields, flags = {}, []
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model") and key not in fields:
                    fields[key] = value.strip()
                elif key == "flags" and not flags:
                    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                              "avx512_bf16", "avx512_vnni", "amx_bf16")
                    flags = [f for f in value.split() if f in wanted]
    except OSError:
        pass
    if not fields:
        return platform.processor() or "unknown"
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}; {' '.join(flags) or 'no AVX2'})")


def find(records, preset, fmt_name, m, dtype="bf16"):
    for r in records:
        if (r["preset"] == preset and r["format"] == fmt_name and r["M"] == m
                and r.get("dtype", "bf16") == dtype):
            return r
    return None


def format_label(r):
    """The format, and the activations' dtype where it is not bf16."""
    dtype = r.get("dtype", "bf16")
    return r["format"] if dtype == "bf16" else f"{r['format']} {dtype}"


def target_lines(records):
    lines = ["| target | measured | status |", "| --- | --- | --- |"]

    def status(ok, r):
        if r is None:
            return "not run"
        if r.get("below_floor"):
            return "measurement error (below the floor)"
        return "met" if ok else "missed"

    for preset, fmt_name, m, limit in FLOOR_TARGETS:
        r = find(records, preset, fmt_name, m)
        ratio = r and r.get("ratio_to_floor")
        lines.append(f"| {preset} {fmt_name} M={m}: time <= {limit} x floor "
                     f"| {fmt(ratio, '.2f')} x floor | {status(ratio is not None and ratio <= limit, r)} |")
    for preset, fmt_name, m, share in CEILING_TARGETS:
        r = find(records, preset, fmt_name, m)
        got = r and r.get("compute_fraction")
        ceiling = r.get("compute_ceiling", "?") if r else "?"
        lines.append(f"| {preset} {fmt_name} M={m}: >= {share:.0%} of the {ceiling} ceiling "
                     f"| {fmt(got and 100 * got, '.0f')}% | {status(got is not None and got >= share, r)} |")
    for r in records:
        if r["M"] != 1:
            continue
        spread = r["max_ms"] / r["median_ms"] if r.get("median_ms") else None
        lines.append(f"| {r['preset']} {format_label(r)} M=1: slowest forward <= "
                     f"{STEADY_MAX_OVER_MEDIAN} x median | {fmt(spread, '.2f')} x "
                     f"| {status(spread is not None and spread <= STEADY_MAX_OVER_MEDIAN, r)} |")
    speedups = [r["speedup_vs_baseline"] for r in records
                if r.get("speedup_vs_baseline") is not None]
    slow = ", ".join(f"{r['preset']} {format_label(r)} M={r['M']}" for r in records
                     if r.get("speedup_vs_baseline") is not None
                     and r["speedup_vs_baseline"] < MIN_SPEEDUP)
    verdict = "not run" if not speedups else "met" if not slow else f"missed: {slow}"
    lines.append(f"| every record: >= {MIN_SPEEDUP:g}x faster than the f32-dequant baseline "
                 f"| {fmt(min(speedups) if speedups else None, '.2f')}x at the least | {verdict} |")
    sym = find(records, "qwen3-30b-a3b", "gptq-sym", 1)
    for other in ("gptq-asym", "awq"):
        r = find(records, "qwen3-30b-a3b", other, 1)
        if sym is None or r is None:
            lines.append(f"| qwen3-30b-a3b {other} M=1 within 10% of gptq-sym | - | not run |")
            continue
        rel = r["median_ms"] / sym["median_ms"]
        lines.append(f"| qwen3-30b-a3b {other} M=1 within 10% of gptq-sym "
                     f"| {rel:.2f}x gptq-sym's time | {'met' if rel <= 1.10 else 'missed'} |")
    return lines


def main(argv):
    if len(argv) < 5 or (len(argv) - 3) % 2:
        sys.exit(__doc__)
    out_json, out_md = argv[1], argv[2]
    records, commands = [], []
    for command, path in zip(argv[3::2], argv[4::2]):
        with open(path) as run:
            records.extend(json.load(run))
        commands.append(command)
    with open(out_json, "w") as out:
        json.dump(records, out, indent=2)
        out.write("\n")

    commits = sorted({r["commit"] for r in records})
    dates = sorted({r["date"] for r in records})
    first = records[0] if records else {}
    md = [
        f"# CPU bench, {dates[0][:10] if dates else '?'}",
        "",
        f"- commit measured: {', '.join(commits)}",
        f"- dates (UTC): {dates[0] if dates else '?'} to {dates[-1] if dates else '?'}",
        f"- machine: {cpu_model()}, {first.get('threads', '?')} threads used",
        f"- caches: {first.get('cache_policy', '?')}",
        f"- OpenBLAS kernels (baseline): "
        f"{', '.join(sorted({str(r.get('openblas_core')) for r in records}))}",
        f"- CPU kernel table and the instruction bounding it: "
        f"{', '.join(sorted({str(r.get('kernel_table')) + ' (' + str(r.get('compute_ceiling')) + ')' for r in records}))}",
        "- floor = max((weight + activation bytes) / read bandwidth, flops / compute ceiling), "
        "both measured in each run (see bench/README.md): the bandwidth is the fastest 16 MiB-per-"
        "thread round of a 1-8 stream reader (with and without software prefetch), the ceiling a "
        "register-only loop of the kernel's instruction on all cores; baseline = weights dequantized to f32 at load + OpenBLAS sgemm per expert, "
        "same routing, same run",
        "- a time below its floor (x floor < 1) is a measurement error and is marked so",
        "- bound: which term sets the floor; load: the machine's 1-minute load average when "
        "that run began (2 cores: anything well above 0 means other work shared the machine "
        "and skews both the floor and the times)",
    ]
    md += [f"- {line}" for line in os.environ.get("REPORT_NOTES", "").splitlines() if line]
    md += [
        "",
        "Commands (bench/run_cpu.sh):",
        "",
    ]
    md += [f"    {c}" for c in commands]
    md += [
        "",
        "| preset | format | M | median ms | min ms | max ms | max/median | floor ms | bound | "
        "x floor | % ceiling | baseline ms | baseline x floor | speedup | GB/s | GFLOP/s | "
        "BW GB/s | ceiling GFLOP/s | err vs ref | load |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | "
        "---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        md.append(
            f"| {r['preset']} | {format_label(r)} | {r['M']} | {fmt(r['median_ms'], '.3f')} | "
            f"{fmt(r['min_ms'], '.3f')} | {fmt(r['max_ms'], '.3f')} | "
            f"{fmt(r['max_ms'] / r['median_ms'] if r.get('median_ms') else None, '.2f')} | "
            f"{fmt(r['floor_ms'], '.3f')} | {r.get('floor_bound') or '-'} | "
            f"{fmt(r['ratio_to_floor'], '.2f')}{' **below floor: measurement error**' if r.get('below_floor') else ''} | "
            f"{fmt(r.get('compute_fraction') and 100 * r['compute_fraction'], '.0f')} | "
            f"{fmt(r['baseline_ms'], '.3f')} | {fmt(r.get('baseline_ratio_to_floor'), '.2f')} | "
            f"{fmt(r.get('speedup_vs_baseline'), '.2f')} | {fmt(r['gbps'], '.2f')} | "
            f"{fmt(r['gflops'], '.1f')} | {fmt(r['bandwidth_gbps'], '.2f')} | "
            f"{fmt(r['peak_gflops'], '.1f')} | {fmt(r.get('rel_err'), '.2e')} | "
            f"{fmt(r.get('load_average'), '.2f')} |")
    ceilings = next((r.get("ceilings") for r in records if r.get("ceilings")), None)
    if ceilings:
        md += ["", "Compute ceilings of the first run (register-only loops, GFLOP/s):", "",
               "| instruction | one core | all cores |", "| --- | ---: | ---: |"]
        for name, c in ceilings.items():
            md.append(f"| {name} | {fmt(c and c['core_gflops'], '.1f')} | "
                      f"{fmt(c and c['all_gflops'], '.1f')} |" if c else f"| {name} | not on this CPU | - |")
    md += ["", "## CPU targets", ""] + target_lines(records) + [""]
    with open(out_md, "w") as out:
        out.write("\n".join(md))


if __name__ == "__main__":
    main(sys.argv)
