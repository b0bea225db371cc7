#!/usr/bin/env python3
"""Markdown table of an ab_bench.sh folder: graph us per point and variant.

    ab_table.py OUT [VARIANT ...]

Reads OUT/<variant>-round<k>.json (hip_bench.py --graph records), one row per
(preset, weights, M), one column per variant (the order given, else the
files' names in order): each round's graph us in round order, the ratio to
the int4- or bf16-byte floor, and the change of the rounds' mean against the
first variant that has the point. Only same-call rounds are compared: the
drift between calls on the lent GPU (3-5%) is larger than many changes. A
cell whose routings hit another number of experts than that first variant's
(hip_bench.py before 2026-12-03 drew them after every earlier point of the
run) is marked: its change compares other bytes, its ratio still holds.
"""
import glob
import json
import os
import re
import sys


def load(folder, wanted):
    runs = {}  # variant -> {(preset, weights, M): [(round, graph us, ratio, experts hit)]}
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
                (round_index, record["graph_ms"] * 1000.0, record.get("graph_ratio_to_floor"),
                 record.get("experts_hit")))
    return runs


def cell(points, base, base_hit):
    points = sorted(points)
    text = " / ".join(f"{us:.1f}" for _, us, _, _ in points)
    ratios = [r for _, _, r, _ in points if r is not None]
    if ratios:
        text += f" ({min(ratios):.2f}-{max(ratios):.2f}x)"
    if base is not None:
        mean = sum(us for _, us, _, _ in points) / len(points)
        text += f" {100.0 * (mean / base - 1.0):+.1f}%"
        hits = {h for _, _, _, h in points if h is not None}
        if base_hit is not None and any(abs(h - base_hit) > 1e-9 for h in hits):
            text += f" (other routings: {max(hits):.2f} experts hit, not {base_hit:.2f})"
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
        base = base_hit = None
        cells = []
        for variant in variants:
            points = runs[variant].get(key)
            if not points:
                cells.append("")
                continue
            cells.append(cell(points, base, base_hit))
            if base is None:
                base = sum(us for _, us, _, _ in points) / len(points)
                base_hit = points[0][3]
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    print("\ngraph us per round in round order (ratio to the byte floor); the change is the "
          "rounds' mean against the row's first variant")


if __name__ == "__main__":
    main()
