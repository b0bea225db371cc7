#!/usr/bin/env python3
"""Where a kernel's warps wait, from ncu's source page (ncu_point.sh SASS=1).

The source page is CSV with one row per SASS instruction of each kernel
profiled: its executed count and its warp-stall samples by reason. For
each kernel this prints the samples by reason and by opcode, the executed
instructions by opcode, and the instructions with the most samples.
--context N prints the N instructions before each of those as well. A
wait on an mbarrier shows up as samples on the branch after
SYNCS.PHASECHK; the barrier's shared-memory offset tells which one it is.

    python3 bench/hip/sass_stalls.py OUT/ncu-<point>-sass.csv [--top 25] [--context 8]
"""
import argparse
import collections
import csv
import re

ALL = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def kernels_of(path):
    """{kernel name: [row dict per SASS instruction]} in file order."""
    kernels = collections.OrderedDict()
    name, header = None, None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                name, header = row[1], None
            elif row[0] == "Address":
                header = row
            elif header is not None:
                kernels.setdefault(name, []).append(dict(zip(header, row)))
    return kernels


def count(row, column):
    value = row.get(column, "")
    return int(value) if value.isdigit() else 0


def opcode(source):
    m = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", source)
    return m.group(1) if m else "?"


def share(counter, total, n):
    return ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in counter.most_common(n))


def report(name, rows, top, context):
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    samples = sum(count(r, ALL) for r in rows) or 1
    executed = sum(count(r, EXECUTED) for r in rows) or 1
    by_reason, by_op, ran = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        for c in reasons:
            by_reason[c[len("stall_"):]] += count(r, c)
        by_op[opcode(r["Source"])] += count(r, ALL)
        ran[opcode(r["Source"])] += count(r, EXECUTED)
    print(f"== {name}")
    print(f"samples {samples}, instructions executed {executed}, SASS lines {len(rows)}")
    print(" samples by reason:", share(by_reason, samples, 9))
    print(" samples by opcode:", share(by_op, samples, 12))
    print(" executed by opcode:", share(ran, executed, 14))
    where = {id(r): i for i, r in enumerate(rows)}
    for r in sorted(rows, key=lambda r: -count(r, ALL))[:top]:
        i = where[id(r)]
        for before in rows[max(0, i - context):i]:
            print(f"          {before['Address'][-5:]} x{before[EXECUTED]:>8}  {before['Source'].strip()[:70]}")
        main = sorted(((count(r, c), c[len("stall_"):]) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{n} {v}" for v, n in main if v)
        print(f"  {100 * count(r, ALL) / samples:5.1f}% {r['Address'][-5:]} x{r[EXECUTED]:>8}  "
              f"{r['Source'].strip()[:70]} | {why}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--context", type=int, default=0)
    args = ap.parse_args()
    for name, rows in kernels_of(args.csv).items():
        report(name, rows, args.top, args.context)


if __name__ == "__main__":
    main()
