#!/usr/bin/env python3
"""A complete Mixture-of-Experts layer in numpy around libmoeint4.

    router logits -> softmax -> top-k -> moeint4 forward (int4 GPTQ experts)
    -> compare with a float64 numpy reference of the same layer

Run from the repository root after building the library:

    MOEINT4_LIBRARY=build/lib/libmoeint4.so /usr/bin/python3 examples/python/moe_layer.py

(with the package installed, `pip install ./python`, MOEINT4_LIBRARY may be
left out once the library is on the loader path.)
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

try:
    import moeint4
except ImportError:  # not installed: use the source tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import moeint4
from moeint4 import reference as ref


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--topk", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--intermediate", type=int, default=256)
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--format", choices=["gptq", "awq"], default="gptq")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    E, K, N, M = args.experts, args.hidden, args.intermediate, args.tokens
    rng = np.random.default_rng(2026)

    # A checkpoint as GPTQ (symmetric) or AWQ tools write it, plus the router's weights.
    ckpt = ref.random_checkpoint(rng, args.format, E, K, N, args.group_size,
                                 asymmetric=args.format == "awq")
    router = rng.standard_normal((K, E)).astype(np.float32) / np.sqrt(K)
    x = rng.standard_normal((M, K)).astype(np.float32)
    x_bf16 = moeint4.float32_to_bf16(x)  # numpy has no bfloat16: uint16 bit patterns

    # The router: logits -> softmax over experts -> top-k, renormalized.
    logits = moeint4.bf16_to_float32(x_bf16) @ router
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    topk_ids = np.argsort(-probs, axis=1, kind="stable")[:, :args.topk].astype(np.int32)
    topk_weights = np.take_along_axis(probs, topk_ids, axis=1)
    topk_weights = (topk_weights / topk_weights.sum(axis=1, keepdims=True)).astype(np.float32)

    # The experts, through libmoeint4.
    if args.format == "awq":
        weights = moeint4.Weights.from_awq(
            ckpt["w13_qweight"], ckpt["w13_scales"], ckpt["w2_qweight"], ckpt["w2_scales"],
            ckpt["w13_qzeros"], ckpt["w2_qzeros"], group_size=args.group_size,
            backend=args.backend)
    else:
        weights = moeint4.Weights.from_gptq(
            ckpt["w13_qweight"], ckpt["w13_scales"], ckpt["w2_qweight"], ckpt["w2_scales"],
            group_size=args.group_size, backend=args.backend)
    with weights:
        print(f"moeint4 {moeint4.__version__} from {Path(moeint4.__file__).parent}, library "
              f"{moeint4.library_version()} at {moeint4.library_path()}")
        print(weights.explain())
        start = time.perf_counter()
        out_bits = weights.forward(x_bf16, topk_ids, topk_weights, dtype="bf16")
        elapsed = time.perf_counter() - start
    out = moeint4.bf16_to_float32(out_bits).astype(np.float64)

    # The same layer in float64 numpy, from the checkpoint tensors alone.
    want = ref.checkpoint_moe(moeint4.bf16_to_float32(x_bf16), ckpt, args.format,
                              args.group_size, topk_ids, topk_weights)
    error = ref.relative_l2(out, want)
    bound = 1e-2  # bf16 output (unit roundoff 2^-8) plus f32 accumulation
    print(f"{args.format} E={E} K={K} N={N} group={args.group_size} M={M} topk={args.topk} "
          f"backend={weights.backend}: forward {elapsed * 1e3:.2f} ms, relative L2 error vs "
          f"float64 numpy {error:.2e} (bound {bound:.0e})")
    if not error <= bound:  # NaN fails too
        print("FAILED: moeint4 and the numpy reference disagree", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
