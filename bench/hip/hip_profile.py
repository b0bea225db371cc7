#!/usr/bin/env python3
"""Where the time of one HIP-backend forward goes: per-kernel device times
(torch.profiler / CUPTI sees our kernels too) and the gaps between them, for
a few (preset, M, tile) points. Logged only; hip_bench.py makes the records.

  python3 bench/hip/hip_profile.py --lib build/lib/libmoeint4.so qwen3-30b-a3b:1 mixtral-8x7b:4096:256

--plain runs the forwards without torch.profiler (whose CUPTI session
conflicts with ncu's): the program to put under ncu (bench/hip/ncu_point.sh).
"""
import argparse
import ctypes as C
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hip_bench as hb  # noqa: E402


def setup(lib, name, gen):
    p = hb.PRESETS[name]
    ck = hb.random_checkpoint(p, gen)
    opts = hb.ContextOptions(C.sizeof(hb.ContextOptions), hb.BACKEND_HIP, 0, 0, None, None, None)
    ctx = C.c_void_p()
    hb.check(lib, lib.moeint4_context_create(C.byref(opts), C.byref(ctx)), "context_create")
    d = hb.WeightsDesc()
    d.struct_size = C.sizeof(hb.WeightsDesc)
    d.num_experts = d.num_local_experts = p["E"]
    d.hidden_size, d.intermediate_size, d.group_size = p["K"], p["N"], p["group"]
    d.format, d.scales_dtype = hb.FORMAT_GPTQ_SYM, hb.DTYPE_F16
    d.w13_qweight, d.w13_scales = ck["w13_q"].data_ptr(), ck["w13_s"].data_ptr()
    d.w2_qweight, d.w2_scales = ck["w2_q"].data_ptr(), ck["w2_s"].data_ptr()
    w = C.c_void_p()
    hb.check(lib, lib.moeint4_weights_prepare(ctx, C.byref(d), C.byref(w)), "prepare")
    return p, ctx, w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--plain", action="store_true", help="forwards only, no torch.profiler (for ncu)")
    ap.add_argument("points", nargs="+", help="preset:M[:tile]")
    a = ap.parse_args()
    lib = C.CDLL(a.lib)
    for f in ("moeint4_context_create", "moeint4_weights_prepare", "moeint4_forward"):
        getattr(lib, f).argtypes = [C.c_void_p] * (2 if f == "moeint4_context_create" else 3)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(2)
    loaded = {}
    caller_tile = os.environ.get("MOEINT4_HIP_TILE")  # a point without a tile keeps the caller's
    for point in a.points:
        parts = point.split(":")
        name, M = parts[0], int(parts[1])
        if len(parts) > 2:
            os.environ["MOEINT4_HIP_TILE"] = parts[2]
        elif caller_tile is not None:
            os.environ["MOEINT4_HIP_TILE"] = caller_tile
        else:
            os.environ.pop("MOEINT4_HIP_TILE", None)
        if name not in loaded:
            loaded[name] = setup(lib, name, gen)
        p, ctx, w = loaded[name]
        sets = hb.routings(M, p["E"], p["topk"], 4, gen)
        x = torch.randn(M, p["K"], dtype=torch.bfloat16, device="cuda", generator=gen)
        out = torch.empty_like(x)
        args = hb.forward_args(M, p["topk"], x, out, *sets[0], torch.cuda.current_stream())

        def fwd(i):
            ids, wt = sets[i % len(sets)]
            args.topk_ids, args.topk_weights = ids.data_ptr(), wt.data_ptr()
            hb.check(lib, lib.moeint4_forward(ctx, w, C.byref(args)), "forward")

        wall = statistics.median(hb.time_events(fwd, 20))
        if a.plain:  # the timing forwards are what ncu profiles
            print(f"{point}: forward {wall * 1e3:.1f} us (events)")
            continue
        iters = 8
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(iters):
                fwd(i)
            torch.cuda.synchronize()
        runtime = {}
        for e in prof.events():  # the CUDA runtime calls our forward makes on the host
            if e.device_type.name == "CPU" and e.name.startswith("cuda"):
                runtime.setdefault(e.name, []).append(e.time_range.elapsed_us())
        kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
        kernels.sort(key=lambda e: e.time_range.start)
        per = {}
        for e in kernels:
            per.setdefault(e.name[:60], []).append(e.time_range.elapsed_us())
        busy = sum(e.time_range.elapsed_us() for e in kernels) / iters
        print(f"{point}: forward {wall * 1e3:.1f} us (events), kernels busy {busy:.1f} us/forward")
        for k, v in per.items():
            print(f"    {statistics.median(v):9.1f} us  x{len(v) // iters}  {k}")
        for k, v in sorted(runtime.items()):
            print(f"    host {k}: x{len(v) / iters:g} per forward, median {statistics.median(v):.1f} us")
        last = kernels[-len(kernels) // iters:]
        t0 = last[0].time_range.start
        print("    last forward:", "  ".join(
            f"{e.name.split('<')[0][-14:]}@{e.time_range.start - t0:.0f}+{e.time_range.elapsed_us():.0f}"
            for e in last))


if __name__ == "__main__":
    main()
