"""Weights: prepared int4 MoE expert weights and their forward()."""
from __future__ import annotations

import ctypes
import weakref
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _abi
from ._closing import Closing
from ._loader import lib
from ._quant import FORMAT_NAMES, Projection, describe, group_size_of, int32_ptr
from ._tensors import (View, bf16_declared, cuda_stream_of, empty_like, expect_contiguous,
                       expect_dtype, expect_shape, float32_view, int32_view, view)
from .context import BackendLike, Context, backend_id, backend_info, default_context
from .oracle import explain_problem, make_problem

# GPT-OSS's clamped SwiGLU constants (vLLM's swigluoai defaults).
SWIGLU_DEFAULT_LIMIT = 7.0
SWIGLU_DEFAULT_ALPHA = 1.702
SWIGLU_DEFAULT_BETA = 1.0


class Weights(Closing):
    """Int4 expert weights prepared for one backend (moeint4_weights_prepare).

    Build with Weights.from_gptq / Weights.from_awq; use as a context manager
    or call close(). Immutable once prepared: forward() may run from several
    threads at once.
    """

    def __init__(self, context: Context, handle: int, w13: Projection, group_size: int,
                 zero_offset: int, num_experts: int, expert_map: Optional[np.ndarray]) -> None:
        self._context = context
        self._handle: Optional[int] = handle
        self.expert_map = expert_map  # int32 [num_experts] as prepared, or None
        has_expert_map = expert_map is not None
        self.format = FORMAT_NAMES[w13.format]
        self.num_experts = num_experts
        self.num_local_experts = w13.num_experts
        self.hidden_size = w13.in_features
        self.intermediate_size = w13.out_features // 2
        self.group_size = group_size
        self.zero_offset = zero_offset
        self.has_expert_map = has_expert_map
        self.has_g_idx = w13.g_idx is not None
        value = ctypes.c_int()
        lib().moeint4_weights_backend(handle, ctypes.byref(value))
        info = backend_info(value.value)
        self.backend_id = value.value
        self.backend = info.name.decode()
        self.device_pointers = bool(info.device_pointers)
        context._adopt(self)
        _BY_HANDLE[handle] = self

    # ---- construction ----
    @classmethod
    def from_gptq(cls, w13_qweight: Any, w13_scales: Any, w2_qweight: Any, w2_scales: Any,
                  w13_qzeros: Any = None, w2_qzeros: Any = None, w13_g_idx: Any = None,
                  w2_g_idx: Any = None, *, group_size: Optional[int] = None,
                  zero_offset: int = 0, num_experts: Optional[int] = None,
                  expert_map: Optional[Sequence[int]] = None, scales_dtype: Optional[str] = None,
                  backend: BackendLike = "auto", context: Optional[Context] = None,
                  device_index: int = 0) -> "Weights":
        """GPTQ checkpoint tensors (K = hidden, N = intermediate, E_l = local experts):

            w13_qweight int32 [E_l, K/8, 2N]   (gate rows 0..N-1, up rows N..2N-1)
            w13_scales  f16   [E_l, K/g, 2N]   (bf16: torch.bfloat16, or uint16 + scales_dtype="bf16")
            w2_qweight  int32 [E_l, N/8, K]
            w2_scales   f16   [E_l, N/g, K]
            w13_qzeros  int32 [E_l, K/g, 2N/8], w2_qzeros [E_l, N/g, K/8]: asymmetric GPTQ
                        (without them: symmetric uint4b8, value = q - 8)
            w*_g_idx    int32 [E_l, IN]: k // g, or act-order (GPTQ desc_act; every group
                        exactly g rows; backends that cannot serve it refuse)

        group_size: 32, 64, 128 or -1 (per channel); inferred from the scales when None.
        zero_offset: 1 for AutoGPTQ "v1" checkpoints that store zero - 1.
        num_experts: global expert count (range of topk_ids); default len(expert_map) or E_l.
        expert_map: [num_experts] global id -> local id or -1 (expert parallelism).
        backend / context / device_index: where the weights go (default: a shared
        context per backend and device). Tensors may be numpy arrays or torch
        tensors (device tensors are read back to the host); they can be freed
        afterwards.
        """
        w13 = describe("w13", "gptq", w13_qweight, w13_scales, w13_qzeros, w13_g_idx,
                       scales_dtype, "K", "2N")
        w2 = describe("w2", "gptq", w2_qweight, w2_scales, w2_qzeros, w2_g_idx, scales_dtype,
                      "N", "K")
        return cls._prepare(w13, w2, group_size, zero_offset, num_experts, expert_map, backend,
                            context, device_index)

    @classmethod
    def from_awq(cls, w13_qweight: Any, w13_scales: Any, w2_qweight: Any, w2_scales: Any,
                 w13_qzeros: Any, w2_qzeros: Any, *, group_size: Optional[int] = None,
                 num_experts: Optional[int] = None, expert_map: Optional[Sequence[int]] = None,
                 scales_dtype: Optional[str] = None, backend: BackendLike = "auto",
                 context: Optional[Context] = None, device_index: int = 0) -> "Weights":
        """AWQ checkpoint tensors (packed along the output dim in AWQ's nibble order):

            w13_qweight int32 [E_l, K, 2N/8]    w13_qzeros int32 [E_l, K/g, 2N/8]
            w13_scales  f16   [E_l, K/g, 2N]
            w2_qweight  int32 [E_l, N, K/8]     w2_qzeros  int32 [E_l, N/g, K/8]
            w2_scales   f16   [E_l, N/g, K]

        Other arguments as from_gptq (zero points are used as stored).
        """
        w13 = describe("w13", "awq", w13_qweight, w13_scales, w13_qzeros, None, scales_dtype,
                       "K", "2N")
        w2 = describe("w2", "awq", w2_qweight, w2_scales, w2_qzeros, None, scales_dtype,
                      "N", "K")
        return cls._prepare(w13, w2, group_size, 0, num_experts, expert_map, backend, context,
                            device_index)

    @classmethod
    def from_checkpoint(cls, checkpoint: Any, layer: int, *, shared: bool = False,
                        backend: BackendLike = "auto", context: Optional[Context] = None,
                        device_index: int = 0) -> "Weights":
        """The routed experts of `layer` (the model's layer number) of a checkpoint
        (a moeint4.Checkpoint, or a path opened and closed here); shared=True: the
        layer's quantized shared expert as a one-expert MLP."""
        from .checkpoint import Checkpoint
        owned = not isinstance(checkpoint, Checkpoint)
        ck = Checkpoint(checkpoint) if owned else checkpoint
        try:
            a = ck.layer(layer).arrays(shared=shared)
            common = dict(group_size=a["group_size"], scales_dtype=a["scales_dtype"],
                          backend=backend, context=context, device_index=device_index)
            if a["format"] == "awq":
                return cls.from_awq(a["w13_qweight"], a["w13_scales"], a["w2_qweight"],
                                    a["w2_scales"], a["w13_qzeros"], a["w2_qzeros"], **common)
            return cls.from_gptq(a["w13_qweight"], a["w13_scales"], a["w2_qweight"],
                                 a["w2_scales"], a["w13_qzeros"], a["w2_qzeros"], a["w13_g_idx"],
                                 a["w2_g_idx"], zero_offset=a["zero_offset"], **common)
        finally:
            if owned:
                ck.close()

    @classmethod
    def _prepare(cls, w13: Projection, w2: Projection, group_size: Optional[int],
                 zero_offset: int, num_experts: Optional[int], expert_map: Any,
                 backend: BackendLike, context: Optional[Context], device_index: int) -> "Weights":
        _check_pair(w13, w2)
        size = group_size_of((w13, w2), group_size)
        map_array = None
        if expert_map is not None:
            map_array = np.ascontiguousarray(np.asarray(expert_map), dtype=np.int32)
            if map_array.ndim != 1:
                raise ValueError(f"expert_map must be 1-D [num_experts], got shape {map_array.shape}")
            if num_experts is None:
                num_experts = int(map_array.shape[0])
            elif map_array.shape[0] != num_experts:
                raise ValueError(f"expert_map has {map_array.shape[0]} entries but num_experts = "
                                 f"{num_experts}")
        if num_experts is None:
            num_experts = w13.num_experts
        if context is None:
            context = default_context(backend, device_index)
        elif backend_id(backend) not in (_abi.BACKEND_AUTO, context.requested_backend):
            raise ValueError(f"backend={backend!r} differs from the given context's backend")

        desc = _abi.new_struct(_abi.WeightsDesc)
        desc.num_experts = num_experts
        desc.num_local_experts = w13.num_experts
        desc.expert_map = int32_ptr(map_array.ctypes.data) if map_array is not None else None
        desc.hidden_size = w13.in_features
        desc.intermediate_size = w2.in_features
        desc.group_size = size
        desc.format = w13.format
        desc.zero_offset = zero_offset
        desc.scales_dtype = w13.scales_dtype
        for prefix, p in (("w13", w13), ("w2", w2)):
            m = p.matrix(size, zero_offset)
            setattr(desc, f"{prefix}_qweight", m.qweight)
            setattr(desc, f"{prefix}_scales", m.scales)
            setattr(desc, f"{prefix}_qzeros", m.qzeros)
            setattr(desc, f"{prefix}_g_idx", m.g_idx)
        handle = ctypes.c_void_p()
        lib().moeint4_weights_prepare(context.handle, ctypes.byref(desc), ctypes.byref(handle))
        try:
            return cls(context, int(handle.value), w13, size, zero_offset, num_experts,
                       map_array)
        except BaseException:
            lib().moeint4_weights_release(handle.value)
            raise

    # ---- lifetime ----
    @property
    def closed(self) -> bool:
        return self._handle is None or self._context.closed

    @property
    def handle(self) -> int:
        """The moeint4_weights* (ValueError once closed)."""
        if self._handle is None:
            raise ValueError("these moeint4 Weights are closed")
        if self._context.closed:
            raise ValueError("the Context of these moeint4 Weights is closed")
        return self._handle

    @property
    def context(self) -> Context:
        return self._context

    def close(self) -> None:
        """Releases the prepared weights (moeint4_weights_release). Idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None:
            if _BY_HANDLE.get(handle) is self:
                del _BY_HANDLE[handle]
            if not self._context.closed:
                lib().moeint4_weights_release(handle)

    @staticmethod
    def from_handle(handle: int) -> "Weights":
        """The open Weights whose moeint4_weights* is `handle` (what the torch
        op carries); ValueError when none is."""
        weights = _BY_HANDLE.get(handle)
        if weights is None or weights.closed:
            raise ValueError(f"no open moeint4 Weights has the handle {handle:#x}")
        return weights

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"backend={self.backend}"
        return (f"<moeint4.Weights {self.format} E={self.num_experts} K={self.hidden_size} "
                f"N={self.intermediate_size} group={self.group_size} {state}>")

    # ---- questions ----
    def memory(self) -> Tuple[int, int]:
        """(host_bytes, device_bytes) held by the prepared handle."""
        host, device = ctypes.c_size_t(), ctypes.c_size_t()
        lib().moeint4_weights_memory(self.handle, ctypes.byref(host), ctypes.byref(device))
        return int(host.value), int(device.value)

    def explain(self) -> str:
        """The oracle's decision table for these weights' problem."""
        problem = make_problem(self.format, self.group_size, self.num_experts,
                               self.hidden_size, self.intermediate_size,
                               self.num_local_experts, self.has_expert_map, self.zero_offset,
                               self.has_g_idx)
        return explain_problem(problem, self._context.requested_backend,
                               self._context.device_index)

    # ---- forward ----
    def forward(self, x: Any, topk_ids: Any, topk_weights: Any, *, activation: str = "silu",
                swiglu_limit: float = SWIGLU_DEFAULT_LIMIT,
                swiglu_alpha: float = SWIGLU_DEFAULT_ALPHA,
                swiglu_beta: float = SWIGLU_DEFAULT_BETA,
                apply_router_weight_on_input: bool = False, out: Any = None,
                dtype: Optional[str] = None, stream: Optional[int] = None,
                asynchronous: bool = False, workspace: Any = None) -> Any:
        """out[m] = sum_j topk_weights[m,j] * W2[e] . act(W13[e] . x[m]), e = topk_ids[m,j]

            x            [M, K] float32 / float16 / bfloat16 (numpy: uint16 bit
                         patterns with dtype="bf16")
            topk_ids     [M, topk] int32 global expert ids (int64 is converted)
            topk_weights [M, topk] float32 (other float dtypes are converted)
            out          [M, K] like x, or None for a new array/tensor of x's kind

        activation: "silu", "gelu" or "swiglu_clamp" (uses swiglu_limit/alpha/beta;
        the defaults are GPT-OSS's 7.0 / 1.702 / 1.0).
        apply_router_weight_on_input: scale x by the router weight before W13 instead
        of scaling the expert output.
        Device tensors (torch CUDA/ROCm) go to the library as data_ptr() with the
        current stream of their device (or `stream`), for device backends only;
        numpy arrays given to a device backend are staged through device memory.
        asynchronous: only enqueue the work on the stream and return (what a
        CUDA/HIP graph capture needs; see has_async_forward()): no host
        synchronization, so a bad expert id is not an exception here: its slot
        contributes nothing and check() reports it later. `workspace`: a
        device buffer (torch uint8 tensor) of at least
        workspace_size(M, topk, dtype) bytes, so that nothing is allocated
        during the call; one workspace per concurrently running stream.
        Returns out.
        """
        handle = self.handle
        xv = bf16_declared(view("x", x), dtype)
        expect_dtype(xv, ("f32", "f16", "bf16"))
        expect_shape(xv, (None, self.hidden_size), "[M, K]")
        expect_contiguous(xv)
        tokens = xv.shape[0]
        ids = int32_view("topk_ids", topk_ids, "[M, topk]", (tokens, None), self.num_experts)
        weights = float32_view("topk_weights", topk_weights, "[M, topk]", (tokens, ids.shape[1]))
        if out is None:
            ov = View("out", empty_like(xv), xv.kind, xv.dtype, xv.shape, xv.device, True)
        else:
            ov = view("out", out)
            if ov.kind == "numpy" and ov.dtype == "u16" and xv.dtype == "bf16":
                ov.dtype = "bf16"
            expect_dtype(ov, (xv.dtype,), "out must have x's dtype")
            expect_shape(ov, xv.shape, "[M, K]")
            expect_contiguous(ov)
        for v in (ids, weights, ov):
            if v.device != xv.device:
                raise ValueError(f"{v.name} is on {v.device} but x is on {xv.device}")
        if activation not in _abi.ACTIVATION_BY_NAME:
            raise ValueError(f"activation must be one of {sorted(_abi.ACTIVATION_BY_NAME)}, "
                             f"got {activation!r}")

        args = self._forward_args(asynchronous, workspace)
        args.dtype = _abi.DTYPE_BY_NAME[xv.dtype]
        args.num_tokens = tokens
        args.topk = ids.shape[1]
        args.activation = _abi.ACTIVATION_BY_NAME[activation]
        args.swiglu_limit = swiglu_limit
        args.swiglu_alpha = swiglu_alpha
        args.swiglu_beta = swiglu_beta
        args.apply_router_weight_on_input = int(bool(apply_router_weight_on_input))
        if xv.on_host and self.device_pointers:
            if asynchronous:
                raise ValueError("an asynchronous forward on the device takes device tensors; "
                                 "host arrays are staged synchronously")
            _StagedCall(self._context, (xv, ids, weights), ov).run(handle, args)
        else:
            if not xv.on_host and not self.device_pointers:
                raise ValueError(f"x is on {xv.device} but these weights live on the "
                                 f"'{self.backend}' backend, which takes host memory")
            args.stream = stream if stream is not None else cuda_stream_of(xv)
            _fill_pointers(args, xv.ptr, ids.ptr, weights.ptr, ov.ptr)
            lib().moeint4_forward(self._context.handle, handle, ctypes.byref(args))
        return ov.obj

    __call__ = forward

    def _forward_args(self, asynchronous: bool, workspace: Any) -> Any:
        """The library's whole struct when it has the async fields (flags 0 =
        the synchronous default), else the first-published one."""
        if not has_async_forward():
            if asynchronous or workspace is not None:
                raise NotImplementedError("this libmoeint4 has no asynchronous forward (no "
                                          "moeint4_forward_workspace_size); update the library")
            return _abi.new_struct(_abi.ForwardArgs)
        args = _abi.new_struct(_abi.ForwardArgsAsync)
        args.flags = _abi.FORWARD_ASYNC if asynchronous else 0
        if workspace is not None:
            ws = view("workspace", workspace)
            expect_contiguous(ws)
            args.workspace = ws.ptr
            args.workspace_bytes = ws.nbytes
        return args

    def workspace_size(self, max_tokens: int, topk: int, dtype: str = "bf16") -> int:
        """Bytes of the workspace an asynchronous forward of up to max_tokens
        tokens needs (moeint4_forward_workspace_size); dtype "f32"/"f16"/"bf16"."""
        if not has_async_forward():
            raise NotImplementedError("this libmoeint4 has no asynchronous forward")
        if dtype not in _abi.DTYPE_BY_NAME:
            raise ValueError(f"dtype must be one of {sorted(_abi.DTYPE_BY_NAME)}, got {dtype!r}")
        nbytes = ctypes.c_size_t()
        lib().moeint4_forward_workspace_size(self.handle, max_tokens, topk,
                                             _abi.DTYPE_BY_NAME[dtype], ctypes.byref(nbytes))
        return int(nbytes.value)

    def check(self, stream: Optional[int] = None) -> None:
        """Synchronizes `stream` and raises MoeInt4Error (INVALID_ARGUMENT, the
        message the synchronous forward gives) when an asynchronous forward
        saw a bad expert id since the last check (moeint4_forward_check)."""
        if not has_async_forward():
            return  # nothing ran asynchronously
        lib().moeint4_forward_check(self._context.handle, self.handle, stream)


def has_async_forward() -> bool:
    """Whether the loaded library has the asynchronous, graph-capturable
    forward (forward_args flags/workspace, moeint4_forward_check)."""
    return _abi.has_async_forward(lib())


# Open Weights by their moeint4_weights* (the torch op passes the handle).
_BY_HANDLE: "weakref.WeakValueDictionary[int, Weights]" = weakref.WeakValueDictionary()


def _fill_pointers(args: _abi.ForwardArgs, x: int, ids: int, weights: int, out: int) -> None:
    args.hidden_states = x
    args.topk_ids = int32_ptr(ids)
    args.topk_weights = ctypes.cast(ctypes.c_void_p(weights), ctypes.POINTER(ctypes.c_float))
    args.output = out


class _StagedCall:
    """Host arrays for a device backend: copy in, run, copy out, free."""

    def __init__(self, context: Context, inputs: Tuple[View, ...], out: View) -> None:
        self.context = context
        self.inputs = inputs
        self.out = out

    def run(self, handle: int, args: _abi.ForwardArgs) -> None:
        ctx = self.context
        buffers = []
        try:
            for v in self.inputs + (self.out,):
                buffers.append(ctx.alloc(max(v.nbytes, 1)))
            for v, ptr in zip(self.inputs, buffers):
                if v.nbytes:
                    ctx.copy(ptr, v.ptr, v.nbytes, _abi.COPY_HOST_TO_DEVICE)
            _fill_pointers(args, *buffers)
            lib().moeint4_forward(ctx.handle, handle, ctypes.byref(args))
            if self.out.nbytes:
                ctx.copy(self.out.ptr, buffers[-1], self.out.nbytes, _abi.COPY_DEVICE_TO_HOST)
        finally:
            for ptr in buffers:
                ctx.free(ptr)


def _check_pair(w13: Projection, w2: Projection) -> None:
    """w13 [IN = K, OUT = 2N] and w2 [IN = N, OUT = K] must describe one layer."""
    if w2.num_experts != w13.num_experts:
        raise ValueError(f"w2_qweight holds {w2.num_experts} experts but w13_qweight holds "
                         f"{w13.num_experts}")
    if w2.out_features != w13.in_features:
        raise ValueError(f"w2_qweight's output size {w2.out_features} != hidden size K = "
                         f"{w13.in_features} from w13_qweight")
    if w13.out_features != 2 * w2.in_features:
        raise ValueError(f"w13_qweight's output size {w13.out_features} != 2 * N = "
                         f"{2 * w2.in_features} from w2_qweight")
    if w13.scales_dtype != w2.scales_dtype:
        raise TypeError("w13_scales and w2_scales must have the same dtype")
    if (w13.qzeros is None) != (w2.qzeros is None):
        raise ValueError("pass both w13_qzeros and w2_qzeros, or neither")


