"""Context: a backend choice bound to a device, owning the weights prepared with it."""
from __future__ import annotations

import atexit
import ctypes
import threading
import weakref
from typing import Any, Dict, Optional, Tuple, Union

from . import _abi
from ._closing import Closing
from ._loader import lib

BackendLike = Union[str, int]


def backend_id(backend: BackendLike) -> int:
    """"auto", "cpu", "xpu", "hip", a registered name, or a numeric id."""
    if isinstance(backend, int):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or an id, got {type(backend).__name__}")
    value = ctypes.c_int()
    lib().moeint4_backend_from_name(backend.encode(), ctypes.byref(value))
    return value.value


def backend_info(ident: int) -> _abi.BackendInfo:
    info = _abi.new_struct(_abi.BackendInfo)
    lib().moeint4_backend_query(ident, ctypes.byref(info))
    return info


def backend_name(ident: int) -> str:
    return "auto" if ident == _abi.BACKEND_AUTO else backend_info(ident).name.decode()


class Context(Closing):
    """A libmoeint4 context (moeint4_context_create).

    Args:
        backend: "auto" (the oracle picks per weights; $MOEINT4_BACKEND
            overrides), or a backend name/id to force; a forced backend that
            cannot serve a problem is an error, never a silent fallback.
        device_index: GPU ordinal (ignored by the CPU backend).
        num_threads: CPU worker threads; 0 = one per online core.
        gpu_weights: how a GPU backend holds prepared weights: "int4" (codes,
            scales and zero points on the device, about the checkpoint's
            bytes), "bf16" (dequantized once at prepare, 4x the bytes), or
            "auto" (int4 unless $MOEINT4_HIP_WEIGHTS says bf16). The CPU and
            XPU backends keep their int4 layouts either way.

    Use as a context manager or call close(); closing releases every weights
    handle prepared with it (they raise ValueError afterwards).
    """

    _closed_message = "this moeint4 Context is closed"

    def __init__(self, backend: BackendLike = "auto", device_index: int = 0,
                 num_threads: int = 0, gpu_weights: str = "auto") -> None:
        mode = _abi.GPU_WEIGHTS.get(gpu_weights.lower()) if isinstance(gpu_weights, str) else None
        if mode is None:
            raise ValueError(f"gpu_weights = {gpu_weights!r} is not one of "
                             f"{', '.join(_abi.GPU_WEIGHTS)}")
        self._handle: Optional[int] = None
        self._weights: "weakref.WeakSet[Any]" = weakref.WeakSet()
        options = _abi.new_struct(_abi.ContextOptions)
        options.backend = backend_id(backend)
        options.device_index = device_index
        options.num_threads = num_threads
        options.gpu_weights = mode
        handle = ctypes.c_void_p()
        lib().moeint4_context_create(ctypes.byref(options), ctypes.byref(handle))
        self._handle = handle.value
        self.requested_backend = options.backend
        self.device_index = device_index
        self.gpu_weights = gpu_weights.lower()

    @property
    def backend(self) -> str:
        """The backend the context's memory helpers use (moeint4_context_backend)."""
        value = ctypes.c_int()
        lib().moeint4_context_backend(self.handle, ctypes.byref(value))
        return backend_name(value.value)

    def _adopt(self, weights: Any) -> None:
        self._weights.add(weights)

    def close(self) -> None:
        """Releases the context and every weights handle still alive on it."""
        if self._handle is None:
            return
        for weights in list(self._weights):
            weights.close()
        handle, self._handle = self._handle, None
        lib().moeint4_context_destroy(handle)

    # device memory helpers: used to stage numpy arrays for device backends
    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_void_p()
        lib().moeint4_memory_alloc(self.handle, nbytes, ctypes.byref(ptr))
        return int(ptr.value or 0)

    def free(self, ptr: int) -> None:
        lib().moeint4_memory_free(self.handle, ptr)

    def copy(self, dst: int, src: int, nbytes: int, kind: int) -> None:
        lib().moeint4_memory_copy(self.handle, dst, src, nbytes, kind)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"backend={backend_name(self.requested_backend)}"
        return f"<moeint4.Context {state} device={self.device_index}>"


class _Defaults:
    """One shared context per (backend, device) for callers who pass none."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: Dict[Tuple[int, int], Context] = {}
        # Release while the library and its worker threads are still intact,
        # rather than from finalizers during interpreter teardown.
        atexit.register(self.close_all)

    def close_all(self) -> None:
        with self._lock:
            contexts, self._contexts = list(self._contexts.values()), {}
        for ctx in contexts:
            ctx.close()

    def get(self, backend: BackendLike, device_index: int) -> Context:
        key = (backend_id(backend), device_index)
        with self._lock:
            ctx = self._contexts.get(key)
            if ctx is None or ctx.closed:
                ctx = Context(key[0], device_index)
                self._contexts[key] = ctx
            return ctx


_DEFAULTS = _Defaults()


def default_context(backend: BackendLike = "auto", device_index: int = 0) -> Context:
    """The process-wide context used when Weights.from_* gets no context."""
    return _DEFAULTS.get(backend, device_index)
