#!/usr/bin/env python3
"""Markdown table of an ab_bench.sh folder: graph us per point and variant.

    ab_table.py OUT [VARIANT ...]

Reads OUT/<variant>-round<k>.json (hip_bench.py --graph records), one row per
(preset, weights, M), one column per variant (the order given, else the
files' names in order): each round's graph us in round order, the ratio to
the int4- or bf16-byte floor, and the change of the rounds' mean against the
first variant that has the point. Only same-call rounds are compared: the
drift between calls on the lent GPU (3-5%) is larger than many changes.
"""
import glob
import json
import os
import re
import sys


def load(folder, wanted):
    runs = {}  # variant -> {(preset, weights, M): [(round, graph us, ratio)]}
    for path in sorted(glob.glob(os.path.join(folder, "*-round*.json"))):
        match = re.fullmatch(r"(.+)-round(\d+)\.json", os.path.basename(path))
        if match is None or (wanted and match.group(1) not in wanted):
            continue
        variant, round_index = match.group(1), int(match.group(2))
        for record in json.load(open(path)):
            if record.get("graph_ms") is None:
                continue
            key = (record["preset"], record["weights"], record["M"])
            runs.setdefault(variant, {}).setdefault(key, []).append(
                (round_index, record["graph_ms"] * 1000.0, record.get("graph_ratio_to_floor")))
    return runs


def cell(points, base):
    points = sorted(points)
    text = " / ".join(f"{us:.1f}" for _, us, _ in points)
    ratios = [r for _, _, r in points if r is not None]
    if ratios:
        text += f" ({min(ratios):.2f}-{max(ratios):.2f}x)"
    if base is not None:
        mean = sum(us for _, us, _ in points) / len(points)
        text += f" {100.0 * (mean / base - 1.0):+.1f}%"
    return text


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folder, wanted = sys.argv[1], sys.argv[2:]
    runs = load(folder, wanted)
    variants = [v for v in wanted if v in runs] if wanted else sorted(runs)
    if not variants:
        sys.exit(f"ab_table.py: no <variant>-round<k>.json with graph times in {folder}")
    keys = sorted({k for v in variants for k in runs[v]})
    print("| preset | weights | M | " + " | ".join(variants) + " |")
    print("|---|---|---:|" + "---|" * len(variants))
    for key in keys:
        base = None
        cells = []
        for variant in variants:
            points = runs[variant].get(key)
            if not points:
                cells.append("")
                continue
            cells.append(cell(points, base))
            if base is None:
                base = sum(us for _, us, _ in points) / len(points)
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    print("\ngraph us per round in round order (ratio to the byte floor); the change is the "
          "rounds' mean against the row's first variant")


if __name__ == "__main__":
    main()
