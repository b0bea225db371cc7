"""Numpy arrays and torch tensors seen the same way: kind, dtype, shape,
device, contiguity and a data pointer, with checks whose messages name the
tensor. torch is never imported here unless the caller passed a tensor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ._abi import INVALID_ARGUMENT
from .errors import MoeInt4Error

# Our short dtype names; "bf16" for numpy means uint16 bit patterns declared as such.
_NUMPY_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32",
                 "int64": "i64", "uint8": "u8", "uint16": "u16", "float64": "f64"}
_TORCH_DTYPES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16",
                 "torch.int32": "i32", "torch.int64": "i64", "torch.uint8": "u8",
                 "torch.float64": "f64"}
DTYPE_WORDS = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32",
               "i64": "int64", "u8": "uint8", "u16": "uint16", "f64": "float64"}


def is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


@dataclass
class View:
    """What the ABI needs to know about one tensor argument."""
    name: str
    obj: Any              # the array/tensor, kept alive while the pointer is used
    kind: str             # "numpy" or "torch"
    dtype: str            # short name, see DTYPE_WORDS ("u16" stays "u16" until declared bf16)
    shape: Tuple[int, ...]
    device: str           # "cpu", "cuda:0", ...
    contiguous: bool

    @property
    def ptr(self) -> int:
        if self.kind == "torch":
            return int(self.obj.data_ptr())
        return int(self.obj.ctypes.data)

    @property
    def on_host(self) -> bool:
        return self.device == "cpu"

    @property
    def nbytes(self) -> int:
        if self.kind == "torch":
            return int(self.obj.numel() * self.obj.element_size())
        return int(self.obj.nbytes)


def view(name: str, obj: Any) -> View:
    """Describes a numpy array or torch tensor; anything else is a TypeError."""
    if isinstance(obj, np.ndarray):
        dtype = _NUMPY_DTYPES.get(obj.dtype.name, obj.dtype.name)
        return View(name, obj, "numpy", dtype, tuple(obj.shape), "cpu",
                    bool(obj.flags["C_CONTIGUOUS"]) and obj.dtype.byteorder in "=|<")
    if is_torch(obj):
        dtype = _TORCH_DTYPES.get(str(obj.dtype), str(obj.dtype))
        return View(name, obj, "torch", dtype, tuple(obj.shape), str(obj.device),
                    bool(obj.is_contiguous()))
    raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(obj).__name__}")


def expect_dtype(v: View, allowed: Sequence[str], hint: str = "") -> None:
    if v.dtype not in allowed:
        words = " or ".join(DTYPE_WORDS.get(d, d) for d in allowed)
        raise TypeError(f"{v.name} must be {words}, got {DTYPE_WORDS.get(v.dtype, v.dtype)}"
                        + (f" ({hint})" if hint else ""))


def expect_shape(v: View, expected: Sequence[Optional[int]], meaning: str) -> None:
    """expected: one entry per dimension, None = any size. `meaning` is the
    documented shape, e.g. "[E, K/8, 2N]"."""
    if len(v.shape) != len(expected) or any(
            want is not None and want != got for want, got in zip(expected, v.shape)):
        shown = tuple("?" if want is None else want for want in expected)
        raise ValueError(f"{v.name} has shape {v.shape}, expected {meaning} = "
                         f"({', '.join(str(s) for s in shown)})")


def expect_contiguous(v: View) -> None:
    if not v.contiguous:
        fix = ".contiguous()" if v.kind == "torch" else "np.ascontiguousarray()"
        raise ValueError(f"{v.name} must be C-contiguous in native byte order (use {fix})")


def host_view(name: str, obj: Any) -> View:
    """A View of a tensor on the host; device tensors are copied to the host
    (checkpoint tensors: the ABI takes host pointers at prepare time)."""
    v = view(name, obj)
    if not v.on_host:
        v = view(name, obj.detach().cpu())
    return v


def bf16_declared(v: View, declared: Optional[str]) -> View:
    """numpy has no bfloat16: a uint16 array holds bf16 bit patterns only when
    the caller says so with dtype/scales_dtype="bf16"."""
    if declared is not None and declared not in ("f32", "f16", "bf16"):
        raise ValueError(f"dtype for {v.name} must be 'f32', 'f16' or 'bf16', got {declared!r}")
    if v.dtype == "u16":
        if declared == "bf16":
            v.dtype = "bf16"
        else:
            raise TypeError(f"{v.name} is uint16: pass dtype='bf16' if it holds bfloat16 bit "
                            "patterns (numpy has no bfloat16)")
    elif declared is not None and declared != v.dtype:
        raise TypeError(f"{v.name} is {DTYPE_WORDS.get(v.dtype, v.dtype)} but dtype={declared!r} "
                        "was given")
    return v


def int32_view(name: str, obj: Any, meaning: str, shape: Sequence[Optional[int]],
               bound: Optional[int] = None) -> View:
    """An int32 index tensor; int64 (what argsort/torch.topk return) is
    converted with a copy, on the tensor's own device. With `bound`, int64
    values are range-checked against [0, bound) before the narrowing (2**32 + 1
    would otherwise become 1), failing as the library does for int32 ids."""
    v = view(name, obj)
    if v.dtype == "i64":
        if bound is not None:
            obj = _checked_before_narrowing(v, bound)
        converted = obj.astype(np.int32) if v.kind == "numpy" else obj.to(dtype=_torch().int32)
        v = view(name, converted)
    expect_dtype(v, ("i32",), "int64 is also accepted")
    expect_shape(v, shape, meaning)
    expect_contiguous(v)
    return v


def _checked_before_narrowing(v: View, bound: int) -> Any:
    """Raises the library's INVALID_ARGUMENT for the first int64 value outside
    [0, bound). A device tensor is not read back (that would be a copy and a
    host synchronization per forward, and is impossible inside a CUDA/HIP
    graph capture): its values are clamped to [-1, bound] on the device, so a
    bad one stays bad after narrowing and the library's device-side check
    reports it (with the clamped value, -1 or bound)."""
    if v.kind == "torch" and not v.on_host:
        return v.obj.clamp(-1, bound)
    values = v.obj if v.kind == "numpy" else v.obj.detach().cpu().numpy()
    bad = (values < 0) | (values >= bound)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        index = "".join(f"[{i}]" for i in where)
        raise MoeInt4Error(INVALID_ARGUMENT, f"{v.name}{index} = {int(values[where])} is outside "
                           f"[0, {bound})", "moeint4_forward")
    return v.obj


def float32_view(name: str, obj: Any, meaning: str, shape: Sequence[Optional[int]]) -> View:
    """A float32 tensor; float16/bfloat16/float64 are converted with a copy."""
    v = view(name, obj)
    if v.dtype in ("f16", "f64", "bf16") and not (v.kind == "numpy" and v.dtype == "bf16"):
        converted = obj.astype(np.float32) if v.kind == "numpy" else obj.float()
        v = view(name, converted)
    expect_dtype(v, ("f32",), "float16, bfloat16 and float64 are also accepted")
    expect_shape(v, shape, meaning)
    expect_contiguous(v)
    return v


def empty_like(v: View) -> Any:
    if v.kind == "torch":
        return _torch().empty_like(v.obj, memory_format=_torch().contiguous_format)
    return np.empty_like(v.obj, order="C")


def host_array_like(obj: Any, array: np.ndarray, bf16: bool = False) -> Any:
    """Returns `array` as `obj`'s kind: numpy as is, torch as a CPU tensor
    (bf16 bit patterns viewed as torch.bfloat16 when bf16=True)."""
    if obj is not None and is_torch(obj):
        if bf16:  # through int16: torch before 2.3 has no uint16
            return _torch().from_numpy(array.view(np.int16)).view(_torch().bfloat16)
        return _torch().from_numpy(array)
    return array


def cuda_stream_of(v: View) -> Optional[int]:
    """The current stream of a CUDA/ROCm tensor's device (None for others)."""
    if v.kind == "torch" and v.device.startswith("cuda"):
        return int(_torch().cuda.current_stream(v.obj.device).cuda_stream) or None
    return None


def _torch() -> Any:
    import torch  # only reached when the caller passed a torch tensor
    return torch
