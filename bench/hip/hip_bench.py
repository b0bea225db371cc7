#!/usr/bin/env python3
"""HIP backend bench on a GPU, everything measured in one process and one run:

  floors    device memory bandwidth: the highest of a copy's (bytes read +
            written) and two read-only kernels' (torch.sum over 2 GiB, and
            cuBLAS's GEMV, torch.mv, over a 2 GiB matrix): on the H100 and the
            H200 a BF16 GEMV of ours outran the copy's rate by 1-2% (torch.sum
            was slower than the copy on the H200), so the copy alone was no
            lower bound; and the dense BF16 GEMM rate (torch.matmul, 8192^3,
            random data)
  ours      moeint4_forward (HIP backend, GPTQ-sym int4 checkpoint) through
            ctypes in each weights mode asked for (--weights: bf16 = dequantized
            to BF16 at prepare, int4 = kept int4 on the device), timed with CUDA
            events on the stream handed to it; inputs rotated over several
            routings; each record names its mode (weights) and has its own
            floor: the bytes of the experts hit in that mode's layout
  baselines per-expert torch.matmul over the same routing on BF16 weights of
            the same shapes, and torch._grouped_mm where it exists
  graph     (--graph) MOEINT4_FORWARD_ASYNC forwards on a caller workspace:
            GRAPH_FORWARDS of them captured in one CUDA graph (torch.cuda.graph),
            each replay timed with events, L2 flushed before each replay,
            time / GRAPH_FORWARDS per forward (graph_ms); with
            MOEINT4_BENCH_HOLD_SMS=n (and MOEINT4_BENCH_SM_HOLDER=the path of
            libsm_holder.so, bench/hip/sm_holder.cu) n SMs are held while the
            replays run, so the forward gets the others (held_sms in each record)

Writes one JSON list of records with the CPU bench's fields (preset, format,
backend, M, median_ms, min_ms, max_ms, floor_ms, ratio_to_floor, baseline_ms,
gbps, tflops, commit) plus the parts (baseline_loop_ms, baseline_grouped_ms,
floor_memory_ms, floor_compute_ms, experts_hit, ...).

  python3 bench/hip/hip_bench.py --lib build/lib/libmoeint4.so --json out.json
"""
import argparse
import ctypes as C
import json
import math
import os
import statistics
import sys
import time
import zlib

import torch
import torch.nn.functional as F

PRESETS = {
    "qwen3-30b-a3b": dict(E=128, topk=8, K=2048, N=768, group=128),
    "mixtral-8x7b": dict(E=8, topk=2, K=4096, N=14336, group=128),
}
BACKEND_HIP, FORMAT_GPTQ_SYM, DTYPE_F16, DTYPE_BF16 = 3, 1, 2, 3


class ContextOptions(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("backend", C.c_int), ("device_index", C.c_int),
                ("num_threads", C.c_int), ("native_context", C.c_void_p),
                ("native_device", C.c_void_p), ("native_queue", C.c_void_p),
                ("gpu_weights", C.c_int)]


GPU_WEIGHTS = {"bf16": 1, "int4": 2}


class WeightsDesc(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("num_experts", C.c_int),
                ("num_local_experts", C.c_int), ("expert_map", C.c_void_p),
                ("hidden_size", C.c_int), ("intermediate_size", C.c_int),
                ("group_size", C.c_int), ("format", C.c_int), ("zero_offset", C.c_int),
                ("scales_dtype", C.c_int),
                ("w13_qweight", C.c_void_p), ("w13_scales", C.c_void_p),
                ("w13_qzeros", C.c_void_p), ("w13_g_idx", C.c_void_p),
                ("w2_qweight", C.c_void_p), ("w2_scales", C.c_void_p),
                ("w2_qzeros", C.c_void_p), ("w2_g_idx", C.c_void_p)]


class ForwardArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("dtype", C.c_int), ("num_tokens", C.c_int64),
                ("topk", C.c_int), ("hidden_states", C.c_void_p), ("topk_ids", C.c_void_p),
                ("topk_weights", C.c_void_p), ("output", C.c_void_p), ("activation", C.c_int),
                ("swiglu_limit", C.c_float), ("swiglu_alpha", C.c_float),
                ("swiglu_beta", C.c_float), ("apply_router_weight_on_input", C.c_int),
                ("stream", C.c_void_p), ("flags", C.c_uint32), ("workspace", C.c_void_p),
                ("workspace_bytes", C.c_size_t)]


FORWARD_ASYNC = 0x1
GRAPH_FORWARDS = 20
# vLLM's tuned BF16 Triton fused-MoE kernel on the lent H200 under CUDA-graph
# replay, routing precomputed, L2 flushed (us per forward; for scale; given
# only where the GPU is an H200).
VLLM_GRAPH_US = {
    "qwen3-30b-a3b": {1: 46, 8: 145, 64: 304, 512: 348, 4096: 843},
    "mixtral-8x7b": {1: 199, 8: 594, 64: 677, 512: 989, 4096: 5269},
}


def forward_args(M, topk, x, out, ids, w, stream):
    """The argument struct of one bf16 forward of x into out on `stream`."""
    a = ForwardArgs()
    a.struct_size = C.sizeof(ForwardArgs)
    a.dtype, a.num_tokens, a.topk = DTYPE_BF16, M, topk
    a.hidden_states, a.output = x.data_ptr(), out.data_ptr()
    a.topk_ids, a.topk_weights = ids.data_ptr(), w.data_ptr()
    a.stream = stream.cuda_stream
    return a


def sm_holder():
    """(library, n) when MOEINT4_BENCH_HOLD_SMS asks for n held SMs, else None."""
    n = int(os.environ.get("MOEINT4_BENCH_HOLD_SMS", "0") or 0)
    if n == 0:
        return None
    path = os.environ.get("MOEINT4_BENCH_SM_HOLDER")
    if not path:
        raise RuntimeError("MOEINT4_BENCH_HOLD_SMS needs MOEINT4_BENCH_SM_HOLDER (libsm_holder.so)")
    holder = C.CDLL(path)
    holder.sm_holder_start.argtypes = [C.c_int, C.c_char_p, C.c_size_t]
    return holder, n


def time_graph(lib, ctx, weights, sets, x, out, M, topk, replays, flush, holder):
    """ms per forward of GRAPH_FORWARDS async forwards captured in one graph;
    holder: (library, n) holds n SMs while the replays run, else None."""
    size = C.c_size_t()
    check(lib, lib.moeint4_forward_workspace_size(weights, M, topk, DTYPE_BF16, C.byref(size)),
          "forward_workspace_size")
    workspace = torch.empty(size.value, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    structs = []
    for i in range(GRAPH_FORWARDS):
        ids, w = sets[i % len(sets)]
        a = forward_args(M, topk, x, out, ids, w, stream)
        a.flags, a.workspace, a.workspace_bytes = FORWARD_ASYNC, workspace.data_ptr(), size.value
        structs.append(a)
    with torch.cuda.stream(stream):  # warm-up, outside the capture
        for a in structs[:2]:
            check(lib, lib.moeint4_forward(ctx, weights, C.byref(a)), "async forward")
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for a in structs:
            check(lib, lib.moeint4_forward(ctx, weights, C.byref(a)), "async forward (capture)")
    times = []
    # while SMs are held the whole device never idles: wait on the stream only
    sync = torch.cuda.current_stream().synchronize if holder else torch.cuda.synchronize
    if holder:
        err = C.create_string_buffer(256)
        if holder[0].sm_holder_start(holder[1], err, len(err)) != 0:
            raise RuntimeError(err.value.decode())
    try:
        for r in range(replays + 2):  # replay() runs on the current stream: time it there
            flush.zero_()
            sync()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            if r >= 2:
                times.append(start.elapsed_time(end) / GRAPH_FORWARDS)
    finally:
        if holder and holder[0].sm_holder_stop() != 0:
            raise RuntimeError("sm_holder_stop failed")
    check(lib, lib.moeint4_forward_check(ctx, weights, C.c_void_p(stream.cuda_stream)),
          "forward_check")
    del graph
    return times


def check(lib, status, what):
    if status != 0:
        lib.moeint4_last_error.restype = C.c_char_p
        raise RuntimeError(f"{what}: status {status}: {lib.moeint4_last_error().decode()}")


def time_events(fn, iters, warmup=3):
    """Per-call times in ms (CUDA events around each call on the current stream)."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def measure_floors():
    """(bandwidth, copy bandwidth, read bandwidth, dense BF16 rate); read is
    the faster read-only kernel's, bandwidth the higher of copy and read,
    what the floors divide by."""
    n = 1 << 30  # 2 GiB of bf16 read, 2 GiB written
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    b = torch.empty_like(a)
    t = statistics.median(time_events(lambda i: b.copy_(a), 20))
    copy = 2 * a.numel() * a.element_size() / (t * 1e-3)
    t = statistics.median(time_events(lambda i: torch.sum(a, dtype=torch.float32), 20))
    read = a.numel() * a.element_size() / (t * 1e-3)
    m, v = a.view(32768, -1), a[:32768]  # the same 2 GiB as a matrix, times a vector
    t = statistics.median(time_events(lambda i: torch.mv(m, v), 20))
    read = max(read, a.numel() * a.element_size() / (t * 1e-3))
    del a, b, m, v
    s = 8192
    x = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    t = statistics.median(time_events(lambda i: torch.matmul(x, y), 20))
    rate = 2 * s ** 3 / (t * 1e-3)
    return max(copy, read), copy, read, rate


def random_checkpoint(p, gen):
    """GPTQ-sym int4 arrays (host, pinned) for w13 [E,K/8,2N] and w2 [E,N/8,K]."""
    E, K, N, g = p["E"], p["K"], p["N"], p["group"]

    def q(shape):
        return torch.randint(-2 ** 31, 2 ** 31 - 1, shape, dtype=torch.int32, device="cuda",
                             generator=gen).cpu()

    def s(shape, fan_in):
        return ((torch.rand(shape, device="cuda", generator=gen) + 0.5) * (0.5 / math.sqrt(fan_in))) \
            .to(torch.float16).cpu()

    return dict(w13_q=q((E, K // 8, 2 * N)), w13_s=s((E, K // g, 2 * N), K),
                w2_q=q((E, N // 8, K)), w2_s=s((E, N // g, K), N))


def routings(M, E, topk, count, gen):
    sets = []
    for _ in range(count):
        logits = torch.randn(M, E, device="cuda", generator=gen)
        w, ids = torch.topk(torch.softmax(logits, dim=-1), topk, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).float().contiguous()
        sets.append((ids.to(torch.int32).contiguous(), w))
    return sets


def baseline_loop(x, ids, w, w13, w2, N):
    M, topk = ids.shape
    flat = ids.flatten().long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    tok = order // topk
    xs = x[tok]
    ws = w.flatten()[order].unsqueeze(1)
    out = torch.zeros_like(x, dtype=torch.float32)
    parts, start = [], 0
    for e, c in enumerate(counts):
        if c:
            h = torch.matmul(xs[start:start + c], w13[e].t())
            a = F.silu(h[:, :N]) * h[:, N:]
            parts.append(torch.matmul(a, w2[e].t()))
        start += c
    y = torch.cat(parts) * ws
    out.index_add_(0, tok, y.float())
    return out.to(x.dtype)


def baseline_grouped(x, ids, w, w13_t, w2_t, N):
    M, topk = ids.shape
    flat = ids.flatten().long()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w13_t.shape[0]), 0).to(torch.int32)
    tok = order // topk
    h = torch._grouped_mm(x[tok], w13_t, offs=offs)
    a = F.silu(h[:, :N]) * h[:, N:]
    y = torch._grouped_mm(a, w2_t, offs=offs) * w.flatten()[order].unsqueeze(1)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    out.index_add_(0, tok, y.float())
    return out.to(x.dtype)


def prepare(lib, p, ck, mode, log, name):
    """A context in weights mode `mode` and the checkpoint prepared on it."""
    opts = ContextOptions(C.sizeof(ContextOptions), BACKEND_HIP, 0, 0, None, None, None,
                          GPU_WEIGHTS[mode])
    ctx = C.c_void_p()
    check(lib, lib.moeint4_context_create(C.byref(opts), C.byref(ctx)), "context_create")
    desc = WeightsDesc()
    desc.struct_size = C.sizeof(WeightsDesc)
    desc.num_experts = desc.num_local_experts = p["E"]
    desc.hidden_size, desc.intermediate_size, desc.group_size = p["K"], p["N"], p["group"]
    desc.format, desc.scales_dtype = FORMAT_GPTQ_SYM, DTYPE_F16
    desc.w13_qweight, desc.w13_scales = ck["w13_q"].data_ptr(), ck["w13_s"].data_ptr()
    desc.w2_qweight, desc.w2_scales = ck["w2_q"].data_ptr(), ck["w2_s"].data_ptr()
    weights = C.c_void_p()
    t0 = time.perf_counter()
    check(lib, lib.moeint4_weights_prepare(ctx, C.byref(desc), C.byref(weights)), "prepare")
    prepare_ms = (time.perf_counter() - t0) * 1e3
    host_b, dev_b = C.c_size_t(), C.c_size_t()
    lib.moeint4_weights_memory(weights, C.byref(host_b), C.byref(dev_b))
    ck_bytes = sum(t.numel() * t.element_size() for t in ck.values())
    log(f"{name} [{mode}]: prepare {prepare_ms:.0f} ms, device bytes {dev_b.value / 1e9:.3f} GB "
        f"(int4 checkpoint {ck_bytes / 1e9:.3f} GB, {dev_b.value / ck_bytes:.3f}x)")
    return dict(mode=mode, ctx=ctx, weights=weights, prepare_ms=prepare_ms,
                device_bytes=dev_b.value, checkpoint_bytes=ck_bytes)


def bench_preset(lib, name, p, tokens, hw, commit, gen, log, sweep, graph, baselines, modes):
    E, topk, K, N = p["E"], p["topk"], p["K"], p["N"]
    bandwidth, rate = hw["bandwidth"], hw["rate"]  # the floors'
    # every random draw is seeded from the preset (and M) alone, so that a
    # point's weights and routings do not depend on which presets and sizes
    # ran before it in the process (runs over other size lists compare)
    gen.manual_seed(zlib.crc32(name.encode()))
    ck = random_checkpoint(p, gen)
    prepared = [prepare(lib, p, ck, mode, log, name) for mode in modes]
    del ck

    w13 = (torch.randn(E, 2 * N, K, dtype=torch.bfloat16, device="cuda", generator=gen) * 0.02)
    w2 = (torch.randn(E, K, N, dtype=torch.bfloat16, device="cuda", generator=gen) * 0.02)
    has_grouped = hasattr(torch, "_grouped_mm")
    # bytes of one expert's weights as each mode streams them: bf16, or int4
    # codes + f16 group scales (GPTQ-sym: no zero points)
    expert_bytes = {"bf16": 3 * N * K * 2, "int4": 3 * N * K // 2 + 3 * N * (K // p["group"]) * 2}
    records = []
    stream = torch.cuda.current_stream()
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda") if graph else None
    for M in tokens:
        gen.manual_seed(zlib.crc32(f"{name}:{M}".encode()))
        sets = routings(M, E, topk, 8 if M <= 512 else 4, gen)
        x = torch.randn(M, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        out = torch.empty(M, K, dtype=torch.bfloat16, device="cuda")
        iters = 50 if M <= 512 else 20
        t_loop = time_events(lambda i: baseline_loop(x, *sets[i % len(sets)], w13, w2, N),
                             10 if M <= 512 else 5) if baselines else [float("nan")]
        t_grouped = None
        if has_grouped and baselines:
            try:
                w13_t, w2_t = w13.transpose(-2, -1), w2.transpose(-2, -1)
                t_grouped = time_events(
                    lambda i: baseline_grouped(x, *sets[i % len(sets)], w13_t, w2_t, N), 10)
            except Exception as e:  # noqa: BLE001 - report and go on
                log(f"  torch._grouped_mm failed: {e}")
        hit = statistics.mean(len(torch.unique(ids)) for ids, _ in sets)
        flops = 2 * M * topk * 3 * N * K
        floor_cmp = flops / rate * 1e3
        floors = {m: max((hit * b + 2 * M * K * 2) / bandwidth * 1e3, floor_cmp)
                  for m, b in expert_bytes.items()}
        base_loop = statistics.median(t_loop)
        base_grouped = statistics.median(t_grouped) if t_grouped else None
        baseline = min(base_loop, base_grouped) if base_grouped else base_loop
        for prep in prepared:
            mode, ctx, weights = prep["mode"], prep["ctx"], prep["weights"]
            # one argument struct per routing, filled before timing: the timed
            # region holds the ctypes call alone
            structs = [forward_args(M, topk, x, out, ids, w, stream) for ids, w in sets]
            all_args = [C.byref(a) for a in structs]  # structs keeps each one alive
            forward = lib.moeint4_forward

            def ours(i, ctx=ctx, weights=weights, all_args=all_args):
                status = forward(ctx, weights, all_args[i % len(all_args)])
                if status != 0:
                    check(lib, status, "forward")

            t_ours = time_events(ours, iters)
            t_host = []  # host wall time of the synchronous call, back to back
            for i in range(iters):
                t0 = time.perf_counter()
                ours(i)
                t_host.append((time.perf_counter() - t0) * 1e3)
            if sweep:
                sweep_tiles = (("16", "q8", "q16", "q32", "q64", "q128", "q256", "w256")
                               if mode == "int4" else
                               ("direct", "8v", "16", "64", "128", "w64", "w128", "w256"))
                for tile in sweep_tiles:
                    os.environ["MOEINT4_HIP_TILE"] = tile
                    t = statistics.median(time_events(ours, 10))
                    log(f"    [{mode}] M={M} tile {tile}: {t:.3f} ms")
                os.environ.pop("MOEINT4_HIP_TILE", None)
            # the peers use other (random BF16) weights: check finiteness only
            if not torch.isfinite(out.float()).all():
                raise RuntimeError(f"{name} [{mode}] M={M}: non-finite output")
            t_graph = None
            if graph:
                t_graph = time_graph(lib, ctx, weights, sets, x, out, M, topk,
                                     20 if M <= 512 else 8, flush, hw["holder"])
                if not torch.isfinite(out.float()).all():
                    raise RuntimeError(f"{name} [{mode}] M={M}: non-finite output after graph")
            bytes_moved = hit * expert_bytes[mode] + 2 * M * K * 2
            floor_mem = bytes_moved / bandwidth * 1e3
            floor = floors[mode]  # max(floor_mem, floor_cmp)
            med = statistics.median(t_ours)
            graph_ms = statistics.median(t_graph) if t_graph else None
            r = dict(preset=name, format="gptq-sym", backend="hip", weights=mode, M=M,
                     median_ms=med, min_ms=min(t_ours), max_ms=max(t_ours), floor_ms=floor,
                     ratio_to_floor=med / floor, baseline_ms=baseline,
                     host_call_ms=statistics.median(t_host),
                     gbps=bytes_moved / (med * 1e-3) / 1e9, tflops=flops / (med * 1e-3) / 1e12,
                     commit=commit, floor_memory_ms=floor_mem, floor_compute_ms=floor_cmp,
                     floor_bf16_ms=floors["bf16"], floor_int4_ms=floors["int4"],
                     experts_hit=hit, bytes_per_forward=bytes_moved, flops_per_forward=flops,
                     baseline_loop_ms=base_loop, baseline_grouped_ms=base_grouped,
                     speedup_vs_baseline=baseline / med, iters=iters,
                     dense_bf16_tflops=rate / 1e12, copy_gbps=hw["copy"] / 1e9,
                     read_gbps=hw["read"] / 1e9, floor_gbps=bandwidth / 1e9,
                     prepare_ms=prep["prepare_ms"], device_bytes=prep["device_bytes"],
                     checkpoint_bytes=prep["checkpoint_bytes"],
                     graph_ms=graph_ms, graph_min_ms=min(t_graph) if t_graph else None,
                     graph_forwards=GRAPH_FORWARDS if t_graph else None,
                     graph_ratio_to_floor=graph_ms / floor if graph_ms else None,
                     held_sms=hw["holder"][1] if hw["holder"] and t_graph else 0,
                     vllm_graph_ms=(VLLM_GRAPH_US.get(name, {}).get(M, float("nan")) if hw["h200"]
                                    else float("nan")) / 1e3,
                     timing="CUDA events around each synchronous moeint4_forward, 3 warm-ups, "
                            f"{len(sets)} routings rotated")
            records.append(r)
            if graph_ms is not None:
                log(f"  [{mode}] M={M:5d} graph {graph_ms * 1e3:8.1f} us/forward "
                    f"({graph_ms / floor:5.2f}x floor; vLLM BF16 Triton "
                    f"{r['vllm_graph_ms'] * 1e3:6.0f} us)")
            log(f"  [{mode}] M={M:5d} ours {med:8.3f} ms (host call {r['host_call_ms']:.3f})  "
                f"floor {floor:8.3f} ({r['ratio_to_floor']:5.2f}x; bf16 floor "
                f"{floors['bf16']:.3f}, int4 floor {floors['int4']:.3f})  loop {base_loop:8.3f}  "
                f"grouped {base_grouped if base_grouped else float('nan'):8.3f}"
                f"  {r['gbps']:7.0f} GB/s {r['tflops']:6.1f} TFLOP/s")
    for prep in prepared:
        lib.moeint4_weights_release(prep["weights"])
        lib.moeint4_context_destroy(prep["ctx"])
    del w13, w2, flush
    torch.cuda.empty_cache()
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libmoeint4.so")
    ap.add_argument("--json", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--presets", default="qwen3-30b-a3b,mixtral-8x7b")
    ap.add_argument("--tokens", default="1,8,64,512,4096")
    ap.add_argument("--sweep-tiles", action="store_true",
                    help="also time every row tile (MOEINT4_HIP_TILE) per M, logged only")
    ap.add_argument("--graph", action="store_true",
                    help="also time async forwards replayed from a CUDA graph (graph_ms)")
    ap.add_argument("--weights", default="bf16,int4",
                    help="weights modes to prepare and time (gpu_weights), comma-separated")
    ap.add_argument("--no-baselines", action="store_true",
                    help="skip the torch baselines (baseline_* fields become NaN)")
    a = ap.parse_args()

    def log(s):
        print(s, flush=True)

    lib = C.CDLL(a.lib)
    lib.moeint4_context_create.argtypes = [C.c_void_p, C.c_void_p]
    lib.moeint4_weights_prepare.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
    lib.moeint4_forward.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
    lib.moeint4_weights_memory.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
    lib.moeint4_weights_release.argtypes = [C.c_void_p]
    lib.moeint4_context_destroy.argtypes = [C.c_void_p]
    lib.moeint4_forward_workspace_size.argtypes = [C.c_void_p, C.c_int64, C.c_int, C.c_int,
                                                   C.c_void_p]
    lib.moeint4_forward_check.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    hw = dict(zip(("bandwidth", "copy", "read", "rate"), measure_floors()))
    hw["h200"] = "H200" in torch.cuda.get_device_name()
    hw["holder"] = sm_holder()
    log(f"{torch.cuda.get_device_name()}: copy {hw['copy'] / 1e9:.0f} GB/s, read "
        f"{hw['read'] / 1e9:.0f} GB/s, dense bf16 {hw['rate'] / 1e12:.0f} TFLOP/s, "
        f"torch {torch.__version__}, "
        f"_grouped_mm {'yes' if hasattr(torch, '_grouped_mm') else 'no'}"
        + (f", graph replays with {hw['holder'][1]} SMs held" if hw["holder"] else ""))
    tokens = [int(t) for t in a.tokens.split(",")]
    records = []
    for name in a.presets.split(","):
        records += bench_preset(lib, name, PRESETS[name], tokens, hw, a.commit, gen,
                                log, a.sweep_tiles, a.graph, not a.no_baselines,
                                a.weights.split(","))
    with open(a.json, "w") as f:
        json.dump(records, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
