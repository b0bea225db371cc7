"""moeint4: int4 Mixture-of-Experts layers (W4A16) from Python, over libmoeint4's C ABI.

    import moeint4
    w = moeint4.Weights.from_gptq(w13_qweight, w13_scales, w2_qweight, w2_scales)
    out = w.forward(x, topk_ids, topk_weights)          # numpy in -> numpy out

The library is loaded on first use (see moeint4._loader for where it is
looked for; $MOEINT4_LIBRARY overrides). `moeint4.reference` needs only numpy.
"""
from ._loader import library_path
from ._version import __version__
from .checkpoint import Checkpoint
from .context import Context, default_context
from .errors import LibraryNotFoundError, MoeInt4Error, VersionMismatchError
from .layout import dequantize_bf16, dequantize_f32, gptq_to_xpu, to_xpu, validate
from .oracle import BackendInfo, backends, explain, select
from .reference import bf16_to_float32, float32_to_bf16
from .weights import Weights, has_async_forward


def library_version() -> str:
    """The loaded library's "MAJOR.MINOR.PATCH"."""
    from ._loader import lib
    return lib().moeint4_version_string().decode()


__all__ = [
    "__version__", "BackendInfo", "Checkpoint", "Context", "LibraryNotFoundError", "MoeInt4Error",
    "VersionMismatchError", "Weights", "backends", "bf16_to_float32", "default_context",
    "dequantize_bf16", "dequantize_f32", "explain", "float32_to_bf16", "gptq_to_xpu", "has_async_forward",
    "library_path", "library_version", "select", "to_xpu", "validate",
]
