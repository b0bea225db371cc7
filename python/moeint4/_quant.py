"""One quantized projection stack (w13 or w2, or a single matrix for the
layout helpers) checked against its format's shapes and turned into the
ABI's moeint4_quant_matrix."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from . import _abi
from ._tensors import View, bf16_declared, expect_contiguous, expect_dtype, expect_shape, host_view

FORMAT_NAMES = {_abi.FORMAT_GPTQ_SYM: "gptq_sym", _abi.FORMAT_GPTQ_ASYM: "gptq_asym",
                _abi.FORMAT_AWQ: "awq"}


def int32_ptr(address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), ctypes.POINTER(ctypes.c_int32))


def format_id(family: str, has_qzeros: bool) -> int:
    """family "gptq" (symmetric without qzeros, asymmetric with) or "awq"."""
    if family == "gptq":
        return _abi.FORMAT_GPTQ_ASYM if has_qzeros else _abi.FORMAT_GPTQ_SYM
    if family == "awq":
        return _abi.FORMAT_AWQ
    raise ValueError(f"format must be 'gptq' or 'awq', got {family!r}")


@dataclass
class Projection:
    """Shapes inferred from qweight, everything else checked against them."""
    name: str
    format: int
    num_experts: int
    in_features: int
    out_features: int
    qweight: View
    scales: View
    qzeros: Optional[View]
    g_idx: Optional[View]
    scales_dtype: int

    @property
    def num_groups(self) -> int:
        return int(self.scales.shape[1])

    def matrix(self, group_size: int, zero_offset: int) -> _abi.QuantMatrix:
        m = _abi.new_struct(_abi.QuantMatrix)
        m.format = self.format
        m.zero_offset = zero_offset
        m.num_experts = self.num_experts
        m.in_features = self.in_features
        m.out_features = self.out_features
        m.group_size = group_size
        m.scales_dtype = self.scales_dtype
        m.qweight = int32_ptr(self.qweight.ptr)
        m.scales = self.scales.ptr
        m.qzeros = int32_ptr(self.qzeros.ptr) if self.qzeros is not None else None
        m.g_idx = int32_ptr(self.g_idx.ptr) if self.g_idx is not None else None
        return m


def _int32_tensor(name: str, obj: Any, shape: Sequence[Optional[int]], meaning: str) -> View:
    v = host_view(name, obj)
    expect_dtype(v, ("i32",))
    expect_shape(v, shape, meaning)
    expect_contiguous(v)
    return v


def describe(name: str, family: str, qweight: Any, scales: Any, qzeros: Any = None,
             g_idx: Any = None, scales_dtype: Optional[str] = None,
             in_name: str = "IN", out_name: str = "OUT") -> Projection:
    """Checks one projection's tensors (dtype, rank, contiguity, shapes that
    agree with each other); names in messages are `name`_qweight etc."""
    prefix = f"{name}_" if name else ""
    fmt = format_id(family, qzeros is not None)
    if fmt == _abi.FORMAT_AWQ and qzeros is None:
        raise ValueError(f"{prefix}qzeros is required for AWQ checkpoints")
    if fmt == _abi.FORMAT_AWQ:
        meaning = f"[E, {in_name}, {out_name}/8]"
    else:
        meaning = f"[E, {in_name}/8, {out_name}]"
    qw = _int32_tensor(f"{prefix}qweight", qweight, (None, None, None), meaning)
    experts = qw.shape[0]
    if fmt == _abi.FORMAT_AWQ:
        in_features, out_features = qw.shape[1], qw.shape[2] * 8
    else:
        in_features, out_features = qw.shape[1] * 8, qw.shape[2]

    sc = bf16_declared(host_view(f"{prefix}scales", scales), scales_dtype)
    expect_dtype(sc, ("f16", "bf16"), "checkpoint scales are float16; bfloat16 as "
                 "torch.bfloat16 or uint16 bit patterns with scales_dtype='bf16'")
    expect_shape(sc, (experts, None, out_features),
                 f"[E, {in_name}/group_size, {out_name}] (E, {out_name} from {prefix}qweight)")
    expect_contiguous(sc)
    groups = sc.shape[1]
    if groups < 1 or in_features % groups:
        raise ValueError(f"{prefix}scales has {groups} groups, which do not divide "
                         f"{in_name} = {in_features}")
    qz = None
    if qzeros is not None:
        qz = _int32_tensor(f"{prefix}qzeros", qzeros, (experts, groups, out_features // 8),
                           f"[E, {in_name}/group_size, {out_name}/8] (from {prefix}qweight, "
                           f"{prefix}scales)")
    gi = None
    if g_idx is not None:
        gi = _int32_tensor(f"{prefix}g_idx", g_idx, (experts, in_features), f"[E, {in_name}]")
    dtype_id = _abi.DTYPE_BF16 if sc.dtype == "bf16" else _abi.DTYPE_F16
    return Projection(name, fmt, experts, in_features, out_features, qw, sc, qz, gi, dtype_id)


def group_size_of(projections: Sequence[Projection], group_size: Optional[int]) -> int:
    """The group size shared by `projections`: checked when given, inferred
    from the scales' group counts otherwise (one group everywhere = -1)."""
    if group_size is not None:
        for p in projections:
            expected = 1 if group_size == -1 else (p.in_features // group_size if group_size > 0 else 0)
            if group_size != -1 and (group_size <= 0 or p.in_features % group_size):
                raise ValueError(f"group_size = {group_size} does not divide the "
                                 f"{p.name} input size {p.in_features}")
            if p.num_groups != expected:
                raise ValueError(f"{p.scales.name} has {p.num_groups} groups but group_size = "
                                 f"{group_size} needs {expected} for input size {p.in_features}")
        return group_size
    inferred = {p.in_features // p.num_groups for p in projections if p.num_groups > 1}
    if not inferred:
        return -1
    if len(inferred) > 1:
        raise ValueError("the scales of " + " and ".join(p.name for p in projections) +
                         f" imply different group sizes {sorted(inferred)}; pass group_size")
    size = inferred.pop()
    group_size_of(projections, size)  # the single-group projections must agree too
    return size
