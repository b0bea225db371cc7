"""ctypes mirror of include/moeint4.h (and moeint4_backend.h's table): enums, structs and the one table of functions.

Everything here follows the header field for field; tests/python/test_abi.py
compiles a small C program against the header and checks every size and offset.
"""
from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint, c_uint8, c_uint16, c_uint32, c_void_p)
from typing import Any, Callable, Dict, List, Optional, Tuple

# C enums are int-sized on every ABI we target.
c_enum = c_int
c_status = c_int
# In FUNCTIONS, a moeint4_status result: declared as int, checked by errcheck.
STATUS = "moeint4_status"

# ---- enum values (pinned forever by the header) ----
STATUS_NAMES: Dict[int, str] = {
    0: "MOEINT4_SUCCESS",
    1: "MOEINT4_INVALID_ARGUMENT",
    2: "MOEINT4_UNSUPPORTED",
    3: "MOEINT4_OUT_OF_MEMORY",
    4: "MOEINT4_BACKEND_UNAVAILABLE",
    5: "MOEINT4_DEVICE_ERROR",
    6: "MOEINT4_VERSION_MISMATCH",
    7: "MOEINT4_INTERNAL_ERROR",
}
SUCCESS = 0
INVALID_ARGUMENT = 1

BACKEND_AUTO, BACKEND_CPU, BACKEND_XPU, BACKEND_HIP = 0, 1, 2, 3
BACKEND_FIRST_CUSTOM = 16
GPU_WEIGHTS = {"auto": 0, "bf16": 1, "int4": 2}  # moeint4_gpu_weights

DTYPE_F32, DTYPE_F16, DTYPE_BF16 = 1, 2, 3
DTYPE_BY_NAME = {"f32": DTYPE_F32, "f16": DTYPE_F16, "bf16": DTYPE_BF16}

FORMAT_GPTQ_SYM, FORMAT_GPTQ_ASYM, FORMAT_AWQ = 1, 2, 3
FORMAT_BY_NAME = {"gptq_sym": FORMAT_GPTQ_SYM, "gptq_asym": FORMAT_GPTQ_ASYM, "awq": FORMAT_AWQ}

ACTIVATION_SILU, ACTIVATION_GELU, ACTIVATION_SWIGLU_CLAMP = 0, 1, 2
ACTIVATION_BY_NAME = {"silu": ACTIVATION_SILU, "gelu": ACTIVATION_GELU,
                      "swiglu_clamp": ACTIVATION_SWIGLU_CLAMP}

COPY_HOST_TO_DEVICE, COPY_DEVICE_TO_HOST, COPY_DEVICE_TO_DEVICE = 1, 2, 3

BACKEND_API_VERSION = 1


# ---- structs ----
class BackendInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("id", c_enum),
        ("name", c_char * 32),
        ("compiled", c_int),
        ("available", c_int),
        ("reason", c_char * 256),
        ("device_pointers", c_int),
    ]


class ContextOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_enum),
        ("device_index", c_int),
        ("num_threads", c_int),
        ("native_context", c_void_p),
        ("native_device", c_void_p),
        ("native_queue", c_void_p),
        ("gpu_weights", c_int),  # moeint4_gpu_weights: 0 AUTO, 1 BF16, 2 INT4
    ]


class QuantMatrix(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("format", c_enum),
        ("zero_offset", c_int),
        ("num_experts", c_int),
        ("in_features", c_int),
        ("out_features", c_int),
        ("group_size", c_int),
        ("scales_dtype", c_enum),
        ("qweight", POINTER(c_int32)),
        ("scales", c_void_p),
        ("qzeros", POINTER(c_int32)),
        ("g_idx", POINTER(c_int32)),
    ]


class WeightsDesc(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("num_experts", c_int),
        ("num_local_experts", c_int),
        ("expert_map", POINTER(c_int32)),
        ("hidden_size", c_int),
        ("intermediate_size", c_int),
        ("group_size", c_int),
        ("format", c_enum),
        ("zero_offset", c_int),
        ("scales_dtype", c_enum),
        ("w13_qweight", POINTER(c_int32)),
        ("w13_scales", c_void_p),
        ("w13_qzeros", POINTER(c_int32)),
        ("w13_g_idx", POINTER(c_int32)),
        ("w2_qweight", POINTER(c_int32)),
        ("w2_scales", c_void_p),
        ("w2_qzeros", POINTER(c_int32)),
        ("w2_g_idx", POINTER(c_int32)),
    ]


# moeint4_forward_args as first published (MOEINT4_FORWARD_ARGS_MIN_SIZE bytes):
# what a library without the asynchronous forward takes.
class ForwardArgs(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("dtype", c_enum),
        ("num_tokens", c_int64),
        ("topk", c_int),
        ("hidden_states", c_void_p),
        ("topk_ids", POINTER(c_int32)),
        ("topk_weights", POINTER(c_float)),
        ("output", c_void_p),
        ("activation", c_enum),
        ("swiglu_limit", c_float),
        ("swiglu_alpha", c_float),
        ("swiglu_beta", c_float),
        ("apply_router_weight_on_input", c_int),
        ("stream", c_void_p),
    ]


# Fields appended for the asynchronous, graph-capturable forward, and the
# struct with them; used only with a library that exports ASYNC_FUNCTIONS.
FORWARD_ASYNC = 0x1
ASYNC_FORWARD_FIELDS = [
    ("flags", c_uint32),
    ("workspace", c_void_p),
    ("workspace_bytes", c_size_t),
]


class ForwardArgsAsync(ForwardArgs):  # a subclass: moeint4_forward's argtype takes it
    _fields_ = ASYNC_FORWARD_FIELDS


class Problem(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("format", c_enum),
        ("group_size", c_int),
        ("num_experts", c_int),
        ("num_local_experts", c_int),
        ("has_expert_map", c_int),
        ("hidden_size", c_int),
        ("intermediate_size", c_int),
        ("zero_offset", c_int),
        ("has_g_idx", c_int),
        ("act_order", c_int),
    ]


# Backend plugin interface: function pointer types, then the table.
ProbeFn = CFUNCTYPE(c_int, c_void_p, c_int, POINTER(c_char), c_size_t)
SupportsFn = CFUNCTYPE(c_int, c_void_p, POINTER(Problem), POINTER(c_char), c_size_t)
ContextCreateFn = CFUNCTYPE(c_status, c_void_p, POINTER(ContextOptions), POINTER(c_void_p),
                            POINTER(c_char), c_size_t)
ContextDestroyFn = CFUNCTYPE(None, c_void_p, c_void_p)
PrepareFn = CFUNCTYPE(c_status, c_void_p, POINTER(WeightsDesc), POINTER(c_void_p),
                      POINTER(c_char), c_size_t)
ReleaseFn = CFUNCTYPE(None, c_void_p, c_void_p)
ForwardFn = CFUNCTYPE(c_status, c_void_p, c_void_p, POINTER(ForwardArgs), POINTER(c_char),
                      c_size_t)
MemoryUsageFn = CFUNCTYPE(None, c_void_p, c_void_p, POINTER(c_size_t), POINTER(c_size_t))
MemoryAllocFn = CFUNCTYPE(c_status, c_void_p, c_size_t, POINTER(c_void_p), POINTER(c_char),
                          c_size_t)
MemoryFreeFn = CFUNCTYPE(None, c_void_p, c_void_p)
MemoryCopyFn = CFUNCTYPE(c_status, c_void_p, c_void_p, c_void_p, c_size_t, c_enum,
                         POINTER(c_char), c_size_t)
GetProcAddressFn = CFUNCTYPE(c_void_p, c_void_p, c_char_p)
ForwardWorkspaceSizeFn = CFUNCTYPE(c_status, c_void_p, c_void_p, c_int64, c_int, c_enum,
                                   POINTER(c_size_t), POINTER(c_char), c_size_t)
ForwardCheckFn = CFUNCTYPE(c_status, c_void_p, c_void_p, c_void_p, POINTER(c_char), c_size_t)


class BackendIface(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("api_version", c_uint32),
        ("id", c_enum),
        ("name", c_char_p),
        ("device_pointers", c_int),
        ("platform_priority", c_int),
        ("user_data", c_void_p),
        ("probe", ProbeFn),
        ("supports", SupportsFn),
        ("context_create", ContextCreateFn),
        ("context_destroy", ContextDestroyFn),
        ("prepare", PrepareFn),
        ("release", ReleaseFn),
        ("forward", ForwardFn),
        ("memory_usage", MemoryUsageFn),
        ("memory_alloc", MemoryAllocFn),
        ("memory_free", MemoryFreeFn),
        ("memory_copy", MemoryCopyFn),
        ("get_proc_address", GetProcAddressFn),
        # appended with the asynchronous forward (optional members)
        ("forward_workspace_size", ForwardWorkspaceSizeFn),
        ("forward_check", ForwardCheckFn),
    ]


ZEROS_GPTQ_V1, ZEROS_GPTQ_V2, ZEROS_AWQ = 1, 2, 3


class CheckpointOptions(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("config_json", c_char_p),
        ("quantization_json", c_char_p),
    ]


class CheckpointInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("model_type", c_char * 32),
        ("architecture", c_char * 64),
        ("quant_method", c_char * 16),
        ("quant_source", c_char * 48),
        ("num_hidden_layers", c_int),
        ("num_moe_layers", c_int),
        ("num_files", c_int),
        ("num_tensors", c_size_t),
        ("file_bytes", c_size_t),
        ("num_warnings", c_int),
    ]


class CheckpointLayerInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("layer", c_int),
        ("num_experts", c_int),
        ("hidden_size", c_int),
        ("intermediate_size", c_int),
        ("top_k", c_int),
        ("format", c_enum),
        ("zeros", c_enum),
        ("zero_offset", c_int),
        ("group_size", c_int),
        ("act_order", c_int),
        ("fused_experts", c_int),
        ("scales_dtype", c_enum),
        ("shared_experts", c_int),
        ("shared_intermediate_size", c_int),
        ("shared_quantized", c_int),
        ("shared_prefix", c_char * 128),
        ("shared_gate_name", c_char * 128),
        ("router_name", c_char * 128),
        ("router_dtype", c_char * 8),
        ("expert_bytes", c_size_t),
    ]


class TensorView(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("file", c_char_p),
        ("dtype", c_char * 8),
        ("ndim", c_int),
        ("shape", c_int64 * 8),
        ("data", c_void_p),
        ("bytes", c_size_t),
    ]


def new_struct(cls: Any) -> Any:
    """A zero-initialised struct with struct_size set, as the header asks."""
    value = cls()
    value.struct_size = ctypes.sizeof(cls)
    return value


class Precision(Structure):
    """moeint4_precision: what a backend computes in for one dtype."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("stated", c_int),
        ("inputs", c_enum),
        ("weights", c_enum),
        ("intermediate", c_enum),
        ("accumulation", c_enum),
    ]


# ---- every exported function: name, restype, argtypes ----
# STATUS marks a function whose result is turned into MoeInt4Error.
Function = Tuple[str, Any, List[Any]]
FUNCTIONS: List[Function] = [
    ("moeint4_version", c_uint, []),
    ("moeint4_version_string", c_char_p, []),
    ("moeint4_status_string", c_char_p, [c_status]),
    ("moeint4_last_error", c_char_p, []),
    ("moeint4_backend_list", STATUS, [POINTER(c_enum), c_int, POINTER(c_int)]),
    ("moeint4_backend_query", STATUS, [c_enum, POINTER(BackendInfo)]),
    ("moeint4_backend_from_name", STATUS, [c_char_p, POINTER(c_enum)]),
    ("moeint4_context_create", STATUS, [POINTER(ContextOptions), POINTER(c_void_p)]),
    ("moeint4_context_destroy", None, [c_void_p]),
    ("moeint4_weights_prepare", STATUS, [c_void_p, POINTER(WeightsDesc), POINTER(c_void_p)]),
    ("moeint4_weights_release", None, [c_void_p]),
    ("moeint4_weights_backend", STATUS, [c_void_p, POINTER(c_enum)]),
    ("moeint4_weights_memory", STATUS, [c_void_p, POINTER(c_size_t), POINTER(c_size_t)]),
    ("moeint4_forward", STATUS, [c_void_p, c_void_p, POINTER(ForwardArgs)]),
    ("moeint4_memory_alloc", STATUS, [c_void_p, c_size_t, POINTER(c_void_p)]),
    ("moeint4_memory_free", None, [c_void_p, c_void_p]),
    ("moeint4_memory_copy", STATUS, [c_void_p, c_void_p, c_void_p, c_size_t, c_enum]),
    ("moeint4_context_backend", STATUS, [c_void_p, POINTER(c_enum)]),
    ("moeint4_debug_live_allocations", STATUS, [POINTER(c_int64)]),
    ("moeint4_oracle_select", STATUS, [POINTER(Problem), c_enum, c_int, POINTER(c_enum)]),
    ("moeint4_oracle_explain", STATUS,
     [POINTER(Problem), c_enum, c_int, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
    ("moeint4_layout_gptq_to_xpu", STATUS, [POINTER(QuantMatrix), POINTER(c_uint8), c_void_p]),
    ("moeint4_layout_to_xpu", STATUS,
     [POINTER(QuantMatrix), POINTER(c_uint8), c_void_p, POINTER(c_uint8)]),
    ("moeint4_layout_dequantize_bf16", STATUS, [POINTER(QuantMatrix), POINTER(c_uint16)]),
    ("moeint4_layout_dequantize_f32", STATUS, [POINTER(QuantMatrix), POINTER(c_float)]),
    ("moeint4_layout_validate", STATUS, [POINTER(QuantMatrix)]),
    ("moeint4_backend_precision", STATUS, [c_enum, c_enum, POINTER(Precision)]),
    # include/moeint4_backend.h
    ("moeint4_register_backend", STATUS, [POINTER(BackendIface), POINTER(c_enum)]),
    ("moeint4_backend_load", STATUS, [c_char_p, POINTER(c_enum)]),
    ("moeint4_backend_get_proc_address", c_void_p, [c_enum, c_char_p]),
    ("moeint4_backend_layout_gptq_to_xpu", None, [POINTER(QuantMatrix), POINTER(c_uint8), c_void_p]),
    ("moeint4_backend_layout_to_xpu", None,
     [POINTER(QuantMatrix), POINTER(c_uint8), c_void_p, POINTER(c_uint8)]),
    ("moeint4_backend_sort_act_order", STATUS,
     [c_void_p, POINTER(c_void_p), POINTER(c_void_p), POINTER(c_void_p), c_char_p, c_size_t]),
    ("moeint4_backend_sorted_free", None, [c_void_p]),
    # include/moeint4.h, Checkpoints
    ("moeint4_checkpoint_open", STATUS,
     [c_char_p, POINTER(CheckpointOptions), POINTER(c_void_p)]),
    ("moeint4_checkpoint_close", None, [c_void_p]),
    ("moeint4_checkpoint_query", STATUS, [c_void_p, POINTER(CheckpointInfo)]),
    ("moeint4_checkpoint_layers", STATUS, [c_void_p, POINTER(c_int), c_int, POINTER(c_int)]),
    ("moeint4_checkpoint_layer_query", STATUS, [c_void_p, c_int, POINTER(CheckpointLayerInfo)]),
    ("moeint4_checkpoint_layer_desc", STATUS, [c_void_p, c_int, POINTER(WeightsDesc)]),
    ("moeint4_checkpoint_shared_desc", STATUS, [c_void_p, c_int, POINTER(WeightsDesc)]),
    ("moeint4_checkpoint_release_layer", STATUS, [c_void_p, c_int]),
    ("moeint4_checkpoint_prepare", STATUS, [c_void_p, c_void_p, c_int, POINTER(c_void_p)]),
    ("moeint4_checkpoint_tensor", STATUS, [c_void_p, c_char_p, POINTER(TensorView)]),
    ("moeint4_checkpoint_tensor_at", STATUS, [c_void_p, c_size_t, POINTER(TensorView)]),
    ("moeint4_checkpoint_warnings", STATUS,
     [c_void_p, POINTER(c_char), c_size_t, POINTER(c_size_t)]),
]

# The asynchronous forward's functions: bound when the library has them (a
# library built before them still loads; the package then offers no async).
ASYNC_FUNCTIONS: List[Function] = [
    ("moeint4_forward_workspace_size", STATUS,
     [c_void_p, c_int64, c_int, c_enum, POINTER(c_size_t)]),
    ("moeint4_forward_check", STATUS, [c_void_p, c_void_p, c_void_p]),
]

STRUCTS = [BackendInfo, ContextOptions, QuantMatrix, WeightsDesc, ForwardArgs, Problem,
           BackendIface, CheckpointOptions, CheckpointInfo, CheckpointLayerInfo, TensorView,
           Precision]


def bind(lib: ctypes.CDLL, errcheck: Callable[..., Any]) -> Optional[str]:
    """Declares every function of FUNCTIONS on `lib`; status-returning ones
    get `errcheck`. Returns the name of the first missing symbol, or None.
    ASYNC_FUNCTIONS are bound too when all of them are present."""
    for name, restype, argtypes in FUNCTIONS:
        if not _bind_one(lib, name, restype, argtypes, errcheck):
            return name
    if has_async_forward(lib):
        for name, restype, argtypes in ASYNC_FUNCTIONS:
            _bind_one(lib, name, restype, argtypes, errcheck)
    return None


def has_async_forward(lib: ctypes.CDLL) -> bool:
    """Whether `lib` has the asynchronous forward (flags/workspace in forward_args)."""
    return all(hasattr(lib, name) for name, _, _ in ASYNC_FUNCTIONS)


def _bind_one(lib: Any, name: str, restype: Any, argtypes: List[Any],
              errcheck: Callable[..., Any]) -> bool:
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return False
    fn.argtypes = argtypes
    if restype == STATUS:
        fn.restype = c_status
        fn.errcheck = errcheck
    else:
        fn.restype = restype
    return True
