#!/usr/bin/env python3
"""A model's MoE block in torch whose experts run through moeint4.torch.fused_experts.

    router (nn.Linear) -> softmax -> top-k, renormalized -> fused_experts(...)
    called with vLLM's keyword names, as an engine's int4 MoE method would

The checkpoint is a random AWQ one; the block's output is compared with a
float64 numpy reference of the same layer. CPU tensors by default (Debian's
torch 1.13 works); --device cuda runs on a GPU through the HIP backend, and
--compile wraps the block in torch.compile(fullgraph=True) where torch has it.

    MOEINT4_LIBRARY=build/lib/libmoeint4.so /usr/bin/python3 examples/python/torch_moe_block.py
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import torch

try:
    import moeint4
except ImportError:  # not installed: use the source tree's package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import moeint4
import moeint4.torch as mtorch
from moeint4 import reference as ref


class Int4MoEBlock(torch.nn.Module):
    """Router plus int4 experts; the experts are a prepared moeint4.Weights."""

    def __init__(self, hidden: int, num_experts: int, topk: int, experts: moeint4.Weights):
        super().__init__()
        self.topk = topk
        self.gate = torch.nn.Linear(hidden, num_experts, bias=False)
        self.experts = experts

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        logits = self.gate(hidden_states.float())
        top = torch.topk(torch.softmax(logits, dim=-1), self.topk, dim=-1)
        topk_weights = top[0] / top[0].sum(dim=-1, keepdim=True)
        # The call an engine's quantized MoE method makes, with vLLM's keywords.
        return mtorch.fused_experts(hidden_states=hidden_states, w1=self.experts, w2=None,
                                    topk_weights=topk_weights,
                                    topk_ids=top[1].to(torch.int32), inplace=False,
                                    activation="silu", apply_router_weight_on_input=False,
                                    global_num_experts=self.experts.num_experts,
                                    expert_map=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    E, K, N, M = args.experts, args.hidden, args.intermediate, args.tokens
    rng = np.random.default_rng(2027)
    device = torch.device(args.device)
    backend = "cpu" if device.type == "cpu" else "hip"

    ckpt = ref.random_checkpoint(rng, "awq", E, K, N, args.group_size, asymmetric=True)
    with moeint4.Weights.from_awq(ckpt["w13_qweight"], ckpt["w13_scales"], ckpt["w2_qweight"],
                                  ckpt["w2_scales"], ckpt["w13_qzeros"], ckpt["w2_qzeros"],
                                  group_size=args.group_size, backend=backend) as experts:
        block = Int4MoEBlock(K, E, args.topk, experts).to(device)
        with torch.no_grad():
            block.gate.weight.copy_(torch.from_numpy(
                rng.standard_normal((E, K)).astype(np.float32) / np.sqrt(K)))
        run = torch.compile(block, fullgraph=True) if args.compile else block
        x = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float32)).to(
            device, torch.bfloat16)
        with torch.no_grad():
            out = run(x)
            top = torch.topk(torch.softmax(block.gate(x.float()), dim=-1), args.topk, dim=-1)

    # The same layer in float64 numpy, from the checkpoint tensors alone.
    tw = (top[0] / top[0].sum(dim=-1, keepdim=True)).cpu().numpy()
    want = ref.checkpoint_moe(x.float().cpu().numpy(), ckpt, "awq", args.group_size,
                              top[1].cpu().numpy(), tw)
    error = ref.relative_l2(out.float().cpu().numpy(), want)
    bound = 2e-2  # bf16 output; the HIP backend rounds to BF16 on the way
    print(f"MoE block E={E} K={K} N={N} top-{args.topk} M={M} on {device} "
          f"(torch {torch.__version__}, backend {backend}{', compiled' if args.compile else ''}):"
          f" relative L2 error vs float64 numpy {error:.2e} (bound {bound:.0e})")
    if not error <= bound:  # NaN fails too
        print("FAILED: the block and the numpy reference disagree", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
