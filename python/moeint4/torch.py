"""torch integration: `torch.ops.moeint4.fused_experts` and a drop-in for vLLM's
`fused_experts` keyword convention.

    import moeint4.torch as mtorch
    w = moeint4.Weights.from_gptq(...)            # prepared once, at load
    out = mtorch.fused_experts(hidden_states, w, None, topk_weights, topk_ids,
                               activation="silu", expert_map=None)

Two operators are registered in the `moeint4` namespace (importing this module
registers them):

    fused_experts(int weights, Tensor hidden_states, Tensor topk_weights,
                  Tensor topk_ids, str activation="silu", Tensor? expert_map=None,
                  bool apply_router_weight_on_input=False) -> Tensor
    fused_experts_out(Tensor(a!) output, int weights, ...same...) -> ()

`weights` is the prepared handle (Weights.handle). Both have a fake (meta)
implementation, so torch.compile(fullgraph=True) traces them, and CPU and
CUDA/ROCm implementations that run on the current stream. Inside a CUDA/HIP
graph capture they use the library's asynchronous forward with a workspace
allocated by torch (from the graph's memory pool): nothing synchronizes and
nothing is allocated by the library; a bad expert id then drops its slot and
`check(weights)` reports it after the replay. Works with torch 1.13 (Debian
12's python3-torch: torch.library.Library with CPU and Meta kernels) and 2.x
(register_fake where it exists).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from .weights import Weights, has_async_forward

__all__ = ["fused_experts", "check", "ACTIVATIONS"]

# vLLM's activation names -> ours ("swigluoai" is GPT-OSS's clamped SwiGLU).
ACTIVATIONS = {"silu": "silu", "gelu": "gelu", "swigluoai": "swiglu_clamp",
               "swiglu_clamp": "swiglu_clamp"}

_ARGS = ("int weights, Tensor hidden_states, Tensor topk_weights, Tensor topk_ids, "
         "str activation=\"silu\", Tensor? expert_map=None, "
         "bool apply_router_weight_on_input=False")
SCHEMA = f"fused_experts({_ARGS}) -> Tensor"
SCHEMA_OUT = f"fused_experts_out(Tensor(a!) output, {_ARGS}) -> ()"


def _run(output: torch.Tensor, weights: int, hidden_states: torch.Tensor,
         topk_weights: torch.Tensor, topk_ids: torch.Tensor, activation: str,
         expert_map: Optional[torch.Tensor], apply_router_weight_on_input: bool) -> None:
    """The real kernel of both operators: one moeint4_forward into `output`."""
    w = Weights.from_handle(weights)
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    _check_expert_map(w, expert_map)
    capturing = _capturing(hidden_states)
    workspace = None
    if capturing:
        if not has_async_forward():
            raise RuntimeError("this libmoeint4 has no asynchronous forward, so it cannot be "
                               "captured in a CUDA/HIP graph")
        dtype = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}.get(
            hidden_states.dtype, "bf16")
        nbytes = w.workspace_size(hidden_states.shape[0], topk_ids.shape[1], dtype)
        workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=hidden_states.device)
    w.forward(hidden_states, topk_ids, topk_weights, activation=ACTIVATIONS[activation],
              apply_router_weight_on_input=apply_router_weight_on_input, out=output,
              asynchronous=capturing, workspace=workspace)


def _capturing(hidden_states: torch.Tensor) -> bool:
    """Whether this call is being captured into a CUDA/HIP graph."""
    return hidden_states.is_cuda and torch.cuda.is_current_stream_capturing()


def _fused_experts_kernel(weights: int, hidden_states: torch.Tensor, topk_weights: torch.Tensor,
                          topk_ids: torch.Tensor, activation: str = "silu",
                          expert_map: Optional[torch.Tensor] = None,
                          apply_router_weight_on_input: bool = False) -> torch.Tensor:
    output = torch.empty_like(hidden_states, memory_format=torch.contiguous_format)
    _run(output, weights, hidden_states, topk_weights, topk_ids, activation, expert_map,
         apply_router_weight_on_input)
    return output


def _fused_experts_out_kernel(output: torch.Tensor, weights: int, hidden_states: torch.Tensor,
                              topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                              activation: str = "silu", expert_map: Optional[torch.Tensor] = None,
                              apply_router_weight_on_input: bool = False) -> None:
    _run(output, weights, hidden_states, topk_weights, topk_ids, activation, expert_map,
         apply_router_weight_on_input)


def _fused_experts_fake(weights: int, hidden_states: torch.Tensor, topk_weights: torch.Tensor,
                        topk_ids: torch.Tensor, activation: str = "silu",
                        expert_map: Optional[torch.Tensor] = None,
                        apply_router_weight_on_input: bool = False) -> torch.Tensor:
    return torch.empty_like(hidden_states, memory_format=torch.contiguous_format)


def _fused_experts_out_fake(output: torch.Tensor, weights: int, hidden_states: torch.Tensor,
                            topk_weights: torch.Tensor, topk_ids: torch.Tensor,
                            activation: str = "silu", expert_map: Optional[torch.Tensor] = None,
                            apply_router_weight_on_input: bool = False) -> None:
    return None


def _register() -> Any:
    """Defines the two operators once per process (a second import of this
    module, e.g. from another path, finds them defined and registers nothing)."""
    if hasattr(torch.ops, "moeint4") and _defined(torch.ops.moeint4, "fused_experts"):
        return None
    library = torch.library.Library("moeint4", "DEF")
    library.define(SCHEMA)
    library.define(SCHEMA_OUT)
    for key in ("CPU", "CUDA"):
        library.impl("fused_experts", _fused_experts_kernel, key)
        library.impl("fused_experts_out", _fused_experts_out_kernel, key)
    register_fake = getattr(torch.library, "register_fake", None) or getattr(
        torch.library, "impl_abstract", None)
    if register_fake is not None:  # torch >= 2.2: a fake kernel for FakeTensor tracing
        register_fake("moeint4::fused_experts", _fused_experts_fake, lib=library)
        register_fake("moeint4::fused_experts_out", _fused_experts_out_fake, lib=library)
    else:  # torch 1.13 - 2.1: the Meta kernel serves meta and fake tensors (1.13 has
        # no fallthrough for AutogradMeta, so the kernel is registered there too)
        for key in ("Meta", "AutogradMeta"):
            library.impl("fused_experts", _fused_experts_fake, key)
            library.impl("fused_experts_out", _fused_experts_out_fake, key)
    return library


def _defined(namespace: Any, name: str) -> bool:
    try:
        getattr(namespace, name)
        return True
    except (AttributeError, RuntimeError):
        return False


_LIBRARY = _register()  # kept alive: the registrations last as long as this object


def fused_experts(hidden_states: torch.Tensor, w1: Weights, w2: Any, topk_weights: torch.Tensor,
                  topk_ids: torch.Tensor, inplace: bool = False, activation: str = "silu",
                  apply_router_weight_on_input: bool = False, global_num_experts: int = -1,
                  expert_map: Optional[torch.Tensor] = None, *, out: Optional[torch.Tensor] = None,
                  **quantization: Any) -> torch.Tensor:
    """vLLM's `fused_experts` keywords over prepared int4 weights.

    w1: the moeint4.Weights (prepared from the layer's w13/w2 checkpoint
    tensors); w2: None or the same Weights (both projections live in it).
    inplace=True writes the result into hidden_states (as vLLM does); `out`
    names another output tensor. activation: "silu", "gelu" or "swigluoai".
    global_num_experts: -1 or the weights' num_experts. expert_map: None or
    the [num_experts] map the weights were prepared with (checked).
    Quantization keywords of vLLM's signature (use_int4_w4a16, w1_scale,
    w2_scale, w1_zp, w2_zp, block_shape, quant_config, ...) are accepted
    because the weights already carry their scales and zeros; a request for
    another arithmetic (fp8/int8 activations) is an error.
    """
    if not isinstance(w1, Weights):
        raise TypeError(f"w1 must be a prepared moeint4.Weights, got {type(w1).__name__}")
    if w2 is not None and w2 is not w1:
        raise ValueError("w2 must be None or the same moeint4.Weights as w1")
    for name in ("use_fp8_w8a8", "use_int8_w8a8", "use_int8_w8a16"):
        if quantization.get(name):
            raise ValueError(f"{name}=True: moeint4 runs int4 weights with 16-bit activations")
    for name in quantization:  # (plain loops: torch.compile traces this function)
        if name not in _VLLM_QUANTIZATION_KEYWORDS:
            raise TypeError(f"fused_experts() got an unexpected keyword argument {name!r}")
    if global_num_experts not in (-1, w1.num_experts):
        raise ValueError(f"global_num_experts = {global_num_experts} but the weights were "
                         f"prepared for {w1.num_experts} experts")
    if inplace and out is not None:
        raise ValueError("pass inplace=True or out=, not both")
    if inplace or out is not None:
        target = hidden_states if inplace else out
        # The library's output must not overlap its inputs: in place goes
        # through a temporary.
        result = out if out is not None else torch.empty_like(hidden_states)
        torch.ops.moeint4.fused_experts_out(result, w1.handle, hidden_states, topk_weights,
                                            topk_ids, activation, expert_map,
                                            apply_router_weight_on_input)
        if inplace:
            target.copy_(result)
        return target
    return torch.ops.moeint4.fused_experts(w1.handle, hidden_states, topk_weights, topk_ids,
                                           activation, expert_map, apply_router_weight_on_input)


_VLLM_QUANTIZATION_KEYWORDS = {
    "use_fp8_w8a8", "use_int8_w8a8", "use_int8_w8a16", "use_int4_w4a16", "per_channel_quant",
    "w1_scale", "w2_scale", "w1_zp", "w2_zp", "a1_scale", "a2_scale", "block_shape",
    "quant_config", "allow_deep_gemm", "allow_cutlass_block_scaled_grouped_gemm", "w1_bias",
    "w2_bias",
}


def check(weights: Weights, stream: Optional[Any] = None) -> None:
    """After captured (asynchronous) forwards: synchronizes the stream (default:
    the current one) and raises MoeInt4Error when one of them saw a bad expert
    id since the last check."""
    if stream is None and torch.cuda.is_available() and weights.device_pointers:
        stream = torch.cuda.current_stream()
    raw = None if stream is None else (int(stream.cuda_stream) or None)
    weights.check(raw)


def _check_expert_map(w: Weights, expert_map: Optional[torch.Tensor]) -> None:
    """The library fixes the expert map at prepare time: a map given per call
    must be that one. Compared once per tensor version (a read-back), and not
    at all inside a graph capture, where it cannot be read."""
    if expert_map is None:
        return
    if tuple(expert_map.shape) != (w.num_experts,):
        raise ValueError(f"expert_map has shape {tuple(expert_map.shape)}, expected "
                         f"[num_experts] = ({w.num_experts},)")
    key = (expert_map.data_ptr(), expert_map._version, str(expert_map.device))
    checked = w.__dict__.setdefault("_checked_expert_maps", set())
    if key in checked:
        return
    if expert_map.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    given = expert_map.detach().cpu().numpy().astype(np.int64)
    prepared = (w.expert_map.astype(np.int64) if w.expert_map is not None
                else np.arange(w.num_experts, dtype=np.int64))
    if not np.array_equal(given, prepared):
        raise ValueError("expert_map differs from the map these weights were prepared with "
                         "(the library takes it at prepare time: Weights.from_*(expert_map=...))")
    checked.add(key)

