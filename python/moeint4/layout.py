"""The library's layout conversions (pure host functions, bit-exact) on arrays.

Results are numpy arrays, or CPU torch tensors when qweight is a torch tensor.
Shapes use IN / OUT for the projection's input / output size (w13: K / 2N,
w2: N / K) and G = IN / group_size (1 per channel).
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

import numpy as np

from . import _abi
from ._loader import lib
from ._quant import describe, group_size_of
from ._tensors import host_array_like


def _matrix(qweight: Any, scales: Any, qzeros: Any, g_idx: Any, format: str,
            group_size: Optional[int], zero_offset: int, scales_dtype: Optional[str]) -> Any:
    projection = describe("", format, qweight, scales, qzeros, g_idx, scales_dtype)
    size = group_size_of((projection,), group_size)
    return projection, projection.matrix(size, zero_offset)


def gptq_to_xpu(qweight: Any, scales: Any, *, g_idx: Any = None,
                group_size: Optional[int] = None,
                scales_dtype: Optional[str] = None) -> Tuple[Any, Any]:
    """GPTQ symmetric qweight int32 [E, IN/8, OUT] + scales [E, G, OUT] ->
    (packed uint8 [E, OUT, IN/2], byte j of row o = code(2j) | code(2j+1) << 4;
     scales [E, OUT, G] in the source dtype)."""
    p, m = _matrix(qweight, scales, None, g_idx, "gptq", group_size, 0, scales_dtype)
    packed = np.empty((p.num_experts, p.out_features, p.in_features // 2), dtype=np.uint8)
    scales_t = np.empty((p.num_experts, p.out_features, p.num_groups), dtype=np.uint16)
    lib().moeint4_layout_gptq_to_xpu(ctypes.byref(m),
                                     packed.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                                     scales_t.ctypes.data)
    bf16 = p.scales_dtype == _abi.DTYPE_BF16
    scales_out = scales_t if bf16 else scales_t.view(np.float16)
    return host_array_like(qweight, packed), host_array_like(qweight, scales_out, bf16)


def to_xpu(qweight: Any, scales: Any, qzeros: Any = None, *, format: str = "gptq",
           group_size: Optional[int] = None, zero_offset: int = 0, g_idx: Any = None,
           scales_dtype: Optional[str] = None) -> Tuple[Any, Any, Any]:
    """Any format -> the XPU layout: (packed, scales) as gptq_to_xpu, and
    zeros uint8 [E, OUT, G], the value subtracted from each code (8 for GPTQ
    symmetric), so value = (code - zero) * scale."""
    p, m = _matrix(qweight, scales, qzeros, g_idx, format, group_size, zero_offset, scales_dtype)
    packed = np.empty((p.num_experts, p.out_features, p.in_features // 2), dtype=np.uint8)
    scales_t = np.empty((p.num_experts, p.out_features, p.num_groups), dtype=np.uint16)
    zeros = np.empty((p.num_experts, p.out_features, p.num_groups), dtype=np.uint8)
    as_bytes = ctypes.POINTER(ctypes.c_uint8)
    lib().moeint4_layout_to_xpu(ctypes.byref(m), packed.ctypes.data_as(as_bytes),
                                scales_t.ctypes.data, zeros.ctypes.data_as(as_bytes))
    bf16 = p.scales_dtype == _abi.DTYPE_BF16
    scales_out = scales_t if bf16 else scales_t.view(np.float16)
    return (host_array_like(qweight, packed), host_array_like(qweight, scales_out, bf16),
            host_array_like(qweight, zeros))


def dequantize_f32(qweight: Any, scales: Any, qzeros: Any = None, *, format: str = "gptq",
                   group_size: Optional[int] = None, zero_offset: int = 0, g_idx: Any = None,
                   scales_dtype: Optional[str] = None) -> Any:
    """Any format -> float32 [E, OUT, IN], exactly (q - zero) * scale.
    format "gptq" (symmetric without qzeros, asymmetric with) or "awq"."""
    p, m = _matrix(qweight, scales, qzeros, g_idx, format, group_size, zero_offset, scales_dtype)
    out = np.empty((p.num_experts, p.out_features, p.in_features), dtype=np.float32)
    lib().moeint4_layout_dequantize_f32(ctypes.byref(m),
                                        out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
    return host_array_like(qweight, out)


def dequantize_bf16(qweight: Any, scales: Any, qzeros: Any = None, *, format: str = "gptq",
                    group_size: Optional[int] = None, zero_offset: int = 0, g_idx: Any = None,
                    scales_dtype: Optional[str] = None) -> Any:
    """Any format -> bfloat16 [E, OUT, IN]: (q - zero) * scale in f32, rounded
    once to nearest even. numpy: uint16 bit patterns; torch: torch.bfloat16."""
    p, m = _matrix(qweight, scales, qzeros, g_idx, format, group_size, zero_offset, scales_dtype)
    out = np.empty((p.num_experts, p.out_features, p.in_features), dtype=np.uint16)
    lib().moeint4_layout_dequantize_bf16(ctypes.byref(m),
                                         out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint16)))
    return host_array_like(qweight, out, bf16=True)


def validate(qweight: Any, scales: Any, qzeros: Any = None, *, format: str = "gptq",
             group_size: Optional[int] = None, zero_offset: int = 0, g_idx: Any = None,
             scales_dtype: Optional[str] = None) -> None:
    """Checks one projection exactly as Weights.from_* would (MoeInt4Error if not)."""
    _, m = _matrix(qweight, scales, qzeros, g_idx, format, group_size, zero_offset, scales_dtype)
    lib().moeint4_layout_validate(ctypes.byref(m))
