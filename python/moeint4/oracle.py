"""backends() and the oracle's decision table, without any weights data."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import List, Optional

from . import _abi
from ._loader import lib
from .context import BackendLike, backend_id, backend_info, backend_name


@dataclass(frozen=True)
class BackendInfo:
    """One backend as moeint4_backend_query reports it."""
    id: int
    name: str
    compiled: bool
    available: bool
    reason: str            # why not compiled/available; "" when available
    device_pointers: bool  # forward() takes device pointers


def backends() -> List[BackendInfo]:
    """Every known backend, in the oracle's priority order for this machine."""
    count = ctypes.c_int()
    lib().moeint4_backend_list(None, 0, ctypes.byref(count))
    ids = (ctypes.c_int * max(count.value, 1))()
    lib().moeint4_backend_list(ids, count.value, ctypes.byref(count))
    result = []
    for ident in ids[:count.value]:
        info = backend_info(ident)
        result.append(BackendInfo(int(info.id), info.name.decode(), bool(info.compiled),
                                  bool(info.available), info.reason.decode(),
                                  bool(info.device_pointers)))
    return result


def make_problem(format: str, group_size: int, num_experts: int, hidden_size: int,
                 intermediate_size: int, num_local_experts: Optional[int] = None,
                 has_expert_map: bool = False, zero_offset: int = 0,
                 has_g_idx: bool = False) -> _abi.Problem:
    """format: "gptq_sym" (or "gptq"), "gptq_asym" or "awq"."""
    name = "gptq_sym" if format == "gptq" else format
    if name not in _abi.FORMAT_BY_NAME:
        raise ValueError(f"format must be one of {sorted(_abi.FORMAT_BY_NAME)}, got {format!r}")
    problem = _abi.new_struct(_abi.Problem)
    problem.format = _abi.FORMAT_BY_NAME[name]
    problem.group_size = group_size
    problem.num_experts = num_experts
    problem.num_local_experts = num_experts if num_local_experts is None else num_local_experts
    problem.has_expert_map = int(has_expert_map)
    problem.hidden_size = hidden_size
    problem.intermediate_size = intermediate_size
    problem.zero_offset = zero_offset
    problem.has_g_idx = int(has_g_idx)
    return problem


def explain_problem(problem: _abi.Problem, requested: int, device_index: int) -> str:
    length = ctypes.c_size_t()
    lib().moeint4_oracle_explain(ctypes.byref(problem), requested, device_index, None, 0,
                                 ctypes.byref(length))
    buffer = ctypes.create_string_buffer(length.value + 1)
    lib().moeint4_oracle_explain(ctypes.byref(problem), requested, device_index, buffer,
                                 len(buffer), ctypes.byref(length))
    return buffer.value.decode("utf-8", "replace")


def explain(format: str = "gptq_sym", *, group_size: int = 128, num_experts: int,
            hidden_size: int, intermediate_size: int, num_local_experts: Optional[int] = None,
            expert_map: bool = False, zero_offset: int = 0, g_idx: bool = False,
            backend: BackendLike = "auto", device_index: int = 0) -> str:
    """The oracle's decision table for a problem: one line per backend in
    priority order with its probe/supports answer, and the choice."""
    problem = make_problem(format, group_size, num_experts, hidden_size, intermediate_size,
                           num_local_experts, expert_map, zero_offset, g_idx)
    return explain_problem(problem, backend_id(backend), device_index)


def select(format: str = "gptq_sym", *, group_size: int = 128, num_experts: int,
           hidden_size: int, intermediate_size: int, num_local_experts: Optional[int] = None,
           expert_map: bool = False, zero_offset: int = 0, g_idx: bool = False,
           backend: BackendLike = "auto", device_index: int = 0) -> str:
    """The name of the backend the oracle picks (MoeInt4Error with every
    backend's reason when none can serve the problem)."""
    problem = make_problem(format, group_size, num_experts, hidden_size, intermediate_size,
                           num_local_experts, expert_map, zero_offset, g_idx)
    chosen = ctypes.c_int()
    lib().moeint4_oracle_select(ctypes.byref(problem), backend_id(backend), device_index,
                                ctypes.byref(chosen))
    return backend_name(chosen.value)
