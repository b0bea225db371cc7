"""Checkpoint: a quantized MoE checkpoint on disk (moeint4_checkpoint_*).

    with moeint4.Checkpoint("/models/Qwen3-30B-A3B-GPTQ-Int4") as ck:
        print(ck.layers, ck.layer(ck.layers[0]).info)
        w = moeint4.Weights.from_checkpoint(ck, layer=ck.layers[0], backend="cpu")

Layer numbers are the model's own, as in the tensor names (a DeepSeek-V2
checkpoint's first MoE layer is 1). Arrays handed out are numpy views of the
mapped files or of the checkpoint's stacked arrays: valid while it is open.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from . import _abi
from ._closing import Closing
from ._loader import lib

_NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I32": np.int32,
                 "I64": np.int64, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
                 "F64": np.float64, "BOOL": np.bool_}
_FORMATS = {_abi.FORMAT_GPTQ_SYM: "gptq_sym", _abi.FORMAT_GPTQ_ASYM: "gptq_asym",
            _abi.FORMAT_AWQ: "awq"}
_ZEROS = {_abi.ZEROS_GPTQ_V1: "gptq", _abi.ZEROS_GPTQ_V2: "gptq_v2", _abi.ZEROS_AWQ: "awq"}


def _array(pointer: Any, dtype: Any, shape: tuple) -> np.ndarray:
    address = ctypes.cast(pointer, ctypes.c_void_p).value if pointer is not None else None
    count = int(np.prod(shape))
    if count == 0 or not address:
        return np.zeros(shape, dtype)
    buf = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(address)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def desc_arrays(desc: _abi.WeightsDesc) -> Dict[str, Any]:
    """numpy views of a filled moeint4_weights_desc, shaped as the header says."""
    e, k, n, g = desc.num_local_experts, desc.hidden_size, desc.intermediate_size, desc.group_size
    g13 = 1 if g == -1 else k // g
    g2 = 1 if g == -1 else n // g
    awq = desc.format == _abi.FORMAT_AWQ
    scales = np.uint16 if desc.scales_dtype == _abi.DTYPE_BF16 else np.float16
    out: Dict[str, Any] = {
        "w13_qweight": _array(desc.w13_qweight, np.int32, (e, k, 2 * n // 8) if awq else (e, k // 8, 2 * n)),
        "w13_scales": _array(desc.w13_scales, scales, (e, g13, 2 * n)),
        "w2_qweight": _array(desc.w2_qweight, np.int32, (e, n, k // 8) if awq else (e, n // 8, k)),
        "w2_scales": _array(desc.w2_scales, scales, (e, g2, k)),
        "w13_qzeros": None, "w2_qzeros": None, "w13_g_idx": None, "w2_g_idx": None,
    }
    if ctypes.cast(desc.w13_qzeros, ctypes.c_void_p).value:
        out["w13_qzeros"] = _array(desc.w13_qzeros, np.int32, (e, g13, 2 * n // 8))
        out["w2_qzeros"] = _array(desc.w2_qzeros, np.int32, (e, g2, k // 8))
    if ctypes.cast(desc.w13_g_idx, ctypes.c_void_p).value:
        out["w13_g_idx"] = _array(desc.w13_g_idx, np.int32, (e, k))
    if ctypes.cast(desc.w2_g_idx, ctypes.c_void_p).value:
        out["w2_g_idx"] = _array(desc.w2_g_idx, np.int32, (e, n))
    return out


@dataclass
class LayerInfo:
    layer: int
    num_experts: int
    hidden_size: int
    intermediate_size: int
    top_k: int
    format: str            # gptq_sym | gptq_asym | awq
    zeros: str             # gptq (v1: stored zero - 1) | gptq_v2 | awq
    zero_offset: int
    group_size: int
    act_order: bool
    fused_experts: bool
    scales_dtype: str
    shared_experts: int
    shared_intermediate_size: int
    shared_quantized: bool
    shared_prefix: str
    shared_gate_name: str
    router_name: str
    router_dtype: str
    expert_bytes: int


class CheckpointLayer:
    """One MoE layer of an open checkpoint."""

    def __init__(self, checkpoint: "Checkpoint", layer: int) -> None:
        self._checkpoint = checkpoint
        raw = _abi.new_struct(_abi.CheckpointLayerInfo)
        lib().moeint4_checkpoint_layer_query(checkpoint.handle, layer, ctypes.byref(raw))
        self.info = LayerInfo(
            raw.layer, raw.num_experts, raw.hidden_size, raw.intermediate_size, raw.top_k,
            _FORMATS[raw.format], _ZEROS[raw.zeros], raw.zero_offset, raw.group_size,
            bool(raw.act_order), bool(raw.fused_experts),
            "bf16" if raw.scales_dtype == _abi.DTYPE_BF16 else "f16", raw.shared_experts,
            raw.shared_intermediate_size, bool(raw.shared_quantized), raw.shared_prefix.decode(),
            raw.shared_gate_name.decode(), raw.router_name.decode(), raw.router_dtype.decode(),
            raw.expert_bytes)
        self.layer = layer

    def arrays(self, shared: bool = False) -> Dict[str, Any]:
        """The routed experts' stacked arrays (or the shared expert's, as one
        expert): w13_qweight, w13_scales, w2_qweight, w2_scales, and qzeros /
        g_idx where the layer has them (else None)."""
        desc = _abi.new_struct(_abi.WeightsDesc)
        fn = lib().moeint4_checkpoint_shared_desc if shared else lib().moeint4_checkpoint_layer_desc
        fn(self._checkpoint.handle, self.layer, ctypes.byref(desc))
        out = desc_arrays(desc)
        out.update(format=_FORMATS[desc.format], group_size=desc.group_size,
                   zero_offset=desc.zero_offset,
                   scales_dtype="bf16" if desc.scales_dtype == _abi.DTYPE_BF16 else "f16")
        return out

    def __repr__(self) -> str:
        i = self.info
        return (f"CheckpointLayer({i.layer}: E={i.num_experts} top-k={i.top_k} K={i.hidden_size} "
                f"N={i.intermediate_size} {i.format} g{i.group_size}"
                f"{' act-order' if i.act_order else ''})")


class Checkpoint(Closing):
    """A directory with config.json and *.safetensors (sharded with an index), or one
    .safetensors file (then config_json / quantization_json may describe it)."""

    _closed_message = "the checkpoint is closed"

    def __init__(self, path: Any, *, config_json: Optional[str] = None,
                 quantization_json: Optional[str] = None) -> None:
        self._handle: Optional[int] = None
        self.path = str(path)
        options = _abi.new_struct(_abi.CheckpointOptions)
        options.config_json = config_json.encode() if config_json else None
        options.quantization_json = quantization_json.encode() if quantization_json else None
        handle = ctypes.c_void_p()
        lib().moeint4_checkpoint_open(self.path.encode(), ctypes.byref(options),
                                      ctypes.byref(handle))
        self._handle = handle.value
        raw = _abi.new_struct(_abi.CheckpointInfo)
        lib().moeint4_checkpoint_query(self._handle, ctypes.byref(raw))
        self.info = {name: (getattr(raw, name).decode() if isinstance(getattr(raw, name), bytes)
                            else getattr(raw, name)) for name, _ in raw._fields_ if name != "struct_size"}
        count = ctypes.c_int()
        lib().moeint4_checkpoint_layers(self._handle, None, 0, ctypes.byref(count))
        numbers = (ctypes.c_int * max(count.value, 1))()
        lib().moeint4_checkpoint_layers(self._handle, numbers, count.value, ctypes.byref(count))
        self.layers: List[int] = list(numbers[:count.value])

    def close(self) -> None:
        if self._handle is not None:
            lib().moeint4_checkpoint_close(self._handle)
            self._handle = None

    def layer(self, layer: int) -> CheckpointLayer:
        return CheckpointLayer(self, layer)

    def tensor(self, name: str) -> np.ndarray:
        """A tensor as stored (a read-only view of the mapped file; BF16 as uint16)."""
        view = _abi.new_struct(_abi.TensorView)
        lib().moeint4_checkpoint_tensor(self.handle, name.encode(), ctypes.byref(view))
        dtype = _NUMPY_DTYPES.get(view.dtype.decode(), np.uint8)
        shape = tuple(view.shape[:view.ndim]) if dtype is not np.uint8 else (view.bytes,)
        return _array(view.data, dtype, shape)

    def tensor_names(self) -> List[str]:
        view = _abi.new_struct(_abi.TensorView)
        names = []
        for i in range(self.info["num_tensors"]):
            lib().moeint4_checkpoint_tensor_at(self.handle, i, ctypes.byref(view))
            names.append(view.name.decode())
        return names

    @property
    def warnings(self) -> List[str]:
        length = ctypes.c_size_t()
        lib().moeint4_checkpoint_warnings(self.handle, None, 0, ctypes.byref(length))
        buf = ctypes.create_string_buffer(length.value + 1)
        lib().moeint4_checkpoint_warnings(self.handle, buf, len(buf), None)
        return [line for line in buf.value.decode().split("\n") if line]

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.info['architecture']}, MoE layers {self.layers}"
        return f"Checkpoint({self.path!r}: {state})"
