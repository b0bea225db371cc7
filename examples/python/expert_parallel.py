#!/usr/bin/env python3
"""Expert parallelism over torch.distributed: one process per rank, each holding a slice of the experts.

Every rank builds the same checkpoint and the same routing (same seed), keeps
the experts it owns (a contiguous slice, given to the library as expert_map)
in a moeint4 context of its own, and computes the layer two ways:

  (a) all-reduce: every rank runs all tokens through its local experts (slots
      routed elsewhere contribute nothing) and the partial outputs are summed
      with all_reduce;
  (b) all-to-all: every rank owns a slice of the tokens; each (token, slot)
      pair travels to the rank that owns its expert (dispatch, with
      all_to_all_single), runs there as a top-1 forward weighted by its router
      weight, travels back (combine) and is summed into its token.

Both are compared with the single-process forward of all experts. On the CPU
(gloo) every rank uses the CPU backend; with --backend nccl rank r uses
cuda:r and the HIP backend on device r. NVLink multicast stays off in every
process (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1).

    MOEINT4_LIBRARY=build/lib/libmoeint4.so /usr/bin/python3 examples/python/expert_parallel.py
    ... --backend nccl --world-size 2 --dtype bf16 --tokens 512     (two GPUs)
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# Set before torch initializes anything, in the launcher and (inherited) in every rank.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

try:
    import moeint4
except ImportError:  # not installed: use the source tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import moeint4
from moeint4 import reference as ref  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def rank_slice(count: int, world: int, rank: int):
    """The contiguous slice [lo, hi) of `count` experts (or tokens) rank `rank` owns."""
    bounds = np.linspace(0, count, world + 1).round().astype(int)
    return int(bounds[rank]), int(bounds[rank + 1])


def problem(args):
    """The same checkpoint, tokens and routing on every rank."""
    rng = np.random.default_rng(args.seed)
    ckpt = ref.random_checkpoint(rng, "gptq", args.experts, args.hidden, args.intermediate,
                                 args.group_size, asymmetric=True)
    logits = rng.standard_normal((args.tokens, args.experts))
    routed = ref.route(logits, args.topk)
    x = rng.standard_normal((args.tokens, args.hidden)).astype(np.float32)
    return ckpt, x, routed["topk_ids"], routed["topk_weights"]


def prepare(ckpt, lo, hi, num_experts, args, context):
    """Weights of experts [lo, hi) of the checkpoint; expert_map when a slice."""
    sliced = {name: np.ascontiguousarray(t[lo:hi]) for name, t in ckpt.items()}
    expert_map = None
    if (lo, hi) != (0, num_experts):
        expert_map = np.full(num_experts, -1, dtype=np.int32)
        expert_map[lo:hi] = np.arange(hi - lo, dtype=np.int32)
    return moeint4.Weights.from_gptq(
        sliced["w13_qweight"], sliced["w13_scales"], sliced["w2_qweight"], sliced["w2_scales"],
        sliced["w13_qzeros"], sliced["w2_qzeros"], group_size=args.group_size,
        num_experts=num_experts, expert_map=expert_map, context=context)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device, fn, *args):
    """(fn(*args), seconds), the device idle before and after (NCCL and GPU
    work is asynchronous: without the synchronizations only the enqueue counts)."""
    synchronize(device)
    start = time.perf_counter()
    result = fn(*args)
    synchronize(device)
    return result, time.perf_counter() - start


def _all_reduce(partial):
    if partial.dtype == torch.bfloat16 and dist.get_backend() == "gloo":
        summed = partial.float()  # gloo has no bfloat16 sum
        dist.all_reduce(summed)
        return summed.to(torch.bfloat16)
    dist.all_reduce(partial)
    return partial


def all_reduce_form(local, x, ids, tw):
    """(a): partial outputs of the local experts, summed over the ranks.
    Returns (output, {"forward": s, "communication": s})."""
    partial, forward_s = timed(x.device, local.forward, x, ids, tw)
    reduced, comm_s = timed(x.device, _all_reduce, partial)
    return reduced, {"forward": forward_s, "communication": comm_s}


def all_to_all_form(local, x, ids, tw, owner_of, world):
    """(b): dispatch (token, slot) pairs to their experts' ranks, run them
    there as top-1 forwards, send the results back and sum them per token.
    Returns (output of this rank's tokens, {"forward": s, "communication": s})."""
    tokens, topk = ids.shape
    device = x.device
    owner = owner_of[ids.long()].reshape(-1)
    owner_sorted, order = torch.sort(owner, stable=True)
    token_of = torch.div(order, topk, rounding_mode="floor")
    send_counts = torch.bincount(owner_sorted, minlength=world)

    def dispatch():
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
        received = sum(recv_split)
        recv_x = x.new_empty((received, x.shape[1]))
        recv_ids = ids.new_empty((received, 1))
        recv_w = tw.new_empty((received, 1))
        dist.all_to_all_single(_bits(recv_x), _bits(x[token_of].contiguous()), recv_split,
                               send_split)
        dist.all_to_all_single(recv_ids, ids.reshape(-1, 1)[order].contiguous(), recv_split,
                               send_split)
        dist.all_to_all_single(recv_w, tw.reshape(-1, 1)[order].contiguous(), recv_split,
                               send_split)
        return recv_x, recv_ids, recv_w, send_split, recv_split

    def combine(results, send_split, recv_split):
        back = x.new_empty((tokens * topk, x.shape[1]))
        dist.all_to_all_single(_bits(back), _bits(results), send_split, recv_split)
        return back

    (recv_x, recv_ids, recv_w, send_split, recv_split), dispatch_s = timed(device, dispatch)
    # Each received pair runs as a top-1 forward weighted by its router weight.
    results, forward_s = timed(device, local.forward, recv_x, recv_ids, recv_w)
    back, combine_s = timed(device, combine, results, send_split, recv_split)
    combined = torch.zeros((tokens, x.shape[1]), dtype=torch.float32, device=device)
    combined.index_add_(0, token_of, back.float())
    return combined.to(x.dtype), {"forward": forward_s, "communication": dispatch_s + combine_s}


def _bits(t):
    """A 16-bit float tensor as bytes for transport: moving bytes is all a
    dispatch does, and gloo moves no bfloat16 (nor int16)."""
    return t.view(torch.uint8) if t.dtype in (torch.bfloat16, torch.float16) else t


def rel_l2(got, want):
    got, want = got.double(), want.double()
    return float(torch.linalg.norm(got - want) / max(float(torch.linalg.norm(want)), 1e-30))


def worker(rank, args, init_file):
    world = args.world_size
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        return run_rank(rank, world, args)
    finally:
        dist.destroy_process_group()


def run_rank(rank, world, args):
    on_gpu = args.backend == "nccl"
    device = torch.device(f"cuda:{rank}" if on_gpu else "cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    threads = 0 if on_gpu else max(1, (os.cpu_count() or 1) // world)
    ckpt, x_np, ids_np, tw_np = problem(args)
    E = args.experts
    lo, hi = rank_slice(E, world, rank)
    owner_of = torch.tensor([r for r in range(world) for _ in range(
        *rank_slice(E, world, r))], dtype=torch.int64, device=device)
    x = torch.from_numpy(x_np).to(device, DTYPES[args.dtype])
    ids = torch.from_numpy(ids_np).to(device)
    tw = torch.from_numpy(tw_np).to(device)
    t_lo, t_hi = rank_slice(args.tokens, world, rank)

    with moeint4.Context("hip" if on_gpu else "cpu", device_index=rank if on_gpu else 0,
                         num_threads=threads) as ctx:
        local = prepare(ckpt, lo, hi, E, args, ctx)
        full = prepare(ckpt, 0, E, E, args, ctx)  # all experts on one rank: the reference
        timings = {"a": [], "b": [], "single": []}
        for _ in range(args.repeat):
            single, single_s = timed(device, full.forward, x, ids, tw)
            timings["single"].append({"total": single_s})
            (reduced, parts), total = timed(device, all_reduce_form, local, x, ids, tw)
            timings["a"].append(dict(parts, total=total))
            (mine, parts), total = timed(device, all_to_all_form, local, x[t_lo:t_hi],
                                         ids[t_lo:t_hi], tw[t_lo:t_hi], owner_of, world)
            timings["b"].append(dict(parts, total=total))
        errors = torch.tensor([rel_l2(reduced, single),
                               rel_l2(mine, single[t_lo:t_hi]) if t_hi > t_lo else 0.0,
                               # a zero result would make any error 0: count it as one
                               float(not bool(torch.isfinite(single).all()) or args.tokens > 0
                                     and float(single.float().abs().max()) == 0.0)],
                              dtype=torch.float64, device=device)
    dist.all_reduce(errors, op=dist.ReduceOp.MAX)
    # Each of the `world` partial results (a) or slot results (b) is rounded
    # once to dtype before the sums, and the single forward's result once:
    # (world + 1) roundings of at most one unit roundoff each.
    bound = (world + 1) * UNIT_ROUNDOFF[args.dtype] + 1e-6
    ok = bool((errors <= bound).all())
    if rank == 0:
        best = {form: min(t, key=lambda entry: entry["total"]) for form, t in timings.items()}
        print(f"expert parallel over {world} ranks ({args.backend}, {device.type}), E={E} "
              f"K={args.hidden} N={args.intermediate} top-{args.topk} M={args.tokens} "
              f"{args.dtype}; rank 0 owns experts [{lo}, {hi}) and tokens [{t_lo}, {t_hi}); "
              f"times on rank 0, best of {args.repeat}")
        print(f"  one rank, all experts: {best['single']['total'] * 1e3:.3f} ms")
        for form, name in (("a", "all-reduce"), ("b", "all-to-all")):
            error = float(errors[0 if form == "a" else 1])
            print(f"  ({form}) {name:10s}: max relative L2 error vs single forward {error:.2e} "
                  f"(bound {bound:.1e}); {best[form]['total'] * 1e3:.3f} ms end to end, "
                  f"{best[form]['forward'] * 1e3:.3f} ms local experts, "
                  f"{best[form]['communication'] * 1e3:.3f} ms communicating")
        print("OK" if ok else "FAILED: expert-parallel results differ from the single forward")
    return ok


def _entry(rank, args, init_file):
    if not worker(rank, args, init_file):
        sys.exit(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=33)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=2028)
    args = parser.parse_args()
    if args.backend == "nccl" and torch.cuda.device_count() < args.world_size:
        print(f"--backend nccl needs {args.world_size} GPUs, found {torch.cuda.device_count()}",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        init_file = os.path.join(folder, "rendezvous")
        try:
            # CPU ranks fork (fast: no second import of torch); GPU ranks are
            # spawned, as CUDA cannot be used in a forked child.
            method = "spawn" if args.backend == "nccl" else "fork"
            torch.multiprocessing.start_processes(_entry, args=(args, init_file),
                                                  nprocs=args.world_size, start_method=method)
        except Exception as exc:  # a rank failed: its traceback is above
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
