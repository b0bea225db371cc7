"""The ctypes table mirrors include/moeint4.h and moeint4_backend.h: every
exported function is declared, every struct has the C layout (checked by
compiling against the headers), status names agree, and the versions fit."""
import ctypes
import re
import shutil
import subprocess

import pytest

import moeint4
from helpers import REPO
from moeint4 import _abi, _loader

HEADER = REPO / "include" / "moeint4.h"
BACKEND_HEADER = REPO / "include" / "moeint4_backend.h"
C_NAMES = {
    "BackendInfo": "moeint4_backend_info", "ContextOptions": "moeint4_context_options",
    "QuantMatrix": "moeint4_quant_matrix", "WeightsDesc": "moeint4_weights_desc",
    "ForwardArgs": "moeint4_forward_args", "Problem": "moeint4_problem",
    "BackendIface": "moeint4_backend_iface", "CheckpointOptions": "moeint4_checkpoint_options",
    "CheckpointInfo": "moeint4_checkpoint_info",
    "CheckpointLayerInfo": "moeint4_checkpoint_layer_info", "TensorView": "moeint4_tensor_view",
    "Precision": "moeint4_precision",
}


def _header_functions():
    text = HEADER.read_text() + BACKEND_HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"MOEINT4_API\s+[^;(]*?\b(moeint4_\w+)\s*\(", text))


def _header_has_async_forward():
    return {name for name, _, _ in _abi.ASYNC_FUNCTIONS} <= _header_functions()


def test_table_declares_every_header_function_once():
    declared = [name for name, _, _ in _abi.FUNCTIONS]
    if _header_has_async_forward():
        declared += [name for name, _, _ in _abi.ASYNC_FUNCTIONS]
    assert len(declared) == len(set(declared))
    assert set(declared) == _header_functions()


def test_every_function_is_exported_and_bound():
    lib = _loader.lib()
    table = list(_abi.FUNCTIONS)
    if _abi.has_async_forward(lib):
        table += _abi.ASYNC_FUNCTIONS
    for name, restype, argtypes in table:
        fn = getattr(lib, name)
        assert fn.argtypes == argtypes, name
        if restype == _abi.STATUS:
            assert fn.errcheck is not None, name


def test_async_forward_is_all_or_nothing():
    """The header and the library agree on the asynchronous forward."""
    assert _abi.has_async_forward(_loader.lib()) == _header_has_async_forward()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to read the header's layout")
def test_struct_layouts_match_the_header(tmp_path):
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "moeint4_backend.h"',
             "int main(void) {"]
    structs = list(_abi.STRUCTS)
    if _header_has_async_forward():
        # The header's moeint4_forward_args is the appended struct; the
        # first-published one keeps its fields' offsets.
        C_NAMES["ForwardArgsAsync"] = "moeint4_forward_args"
        structs.append(_abi.ForwardArgsAsync)
    for cls in structs:
        c = C_NAMES[cls.__name__]
        lines.append(f'printf("{cls.__name__} size %zu\\n", sizeof({c}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{cls.__name__} {field} %zu\\n", offsetof({c}, {field}));')
    lines += ["return 0;", "}"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-std=c11", f"-I{HEADER.parent}", str(source), "-o", str(exe)],
                   check=True)
    seen = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        name, field, value = line.split()
        seen[(name, field)] = int(value)
    for cls in structs:
        if not (cls is _abi.ForwardArgs and _abi.ForwardArgsAsync in structs):
            assert seen[(cls.__name__, "size")] == ctypes.sizeof(cls), cls.__name__
        for field, _ in cls._fields_:
            assert seen[(cls.__name__, field)] == getattr(cls, field).offset, (cls.__name__, field)


def test_status_names_and_version():
    lib = _loader.lib()
    for value, name in _abi.STATUS_NAMES.items():
        assert lib.moeint4_status_string(value).decode() == name
    assert lib.moeint4_status_string(99).decode() == "MOEINT4_UNKNOWN_STATUS"
    major, minor, patch = _loader.version_tuple(lib.moeint4_version())
    assert moeint4.library_version() == f"{major}.{minor}.{patch}"
    assert moeint4.__version__.split(".")[0] == str(major)
    header = HEADER.read_text()
    for part, value in (("MAJOR", major), ("MINOR", minor), ("PATCH", patch)):
        assert re.search(rf"#define MOEINT4_VERSION_{part} {value}\b", header)


def test_version_rule():
    _loader.check_version(10203, "1.2.0")
    _loader.check_version(10300, "1.2.5")  # newer minor: fine
    for number, package in ((10103, "1.2.0"), (20200, "1.2.0"), (200, "1.2.0")):
        with pytest.raises(moeint4.VersionMismatchError, match="does not fit"):
            _loader.check_version(number, package)


def test_backends_and_oracle():
    infos = moeint4.backends()
    names = [b.name for b in infos]
    assert "cpu" in names and names[-1] == "cpu"  # CPU last in the priority order
    cpu = infos[-1]
    assert cpu.compiled and cpu.available and not cpu.device_pointers and cpu.reason == ""
    table = moeint4.explain("gptq_sym", num_experts=8, hidden_size=256, intermediate_size=128)
    assert "cpu" in table and len(table.splitlines()) >= len(infos)
    chosen = moeint4.select("awq", group_size=64, num_experts=8, hidden_size=256,
                            intermediate_size=128)
    assert chosen in names
    assert moeint4.select("gptq_sym", num_experts=8, hidden_size=256, intermediate_size=128,
                          backend="cpu") == "cpu"
    with pytest.raises(ValueError, match="format must be one of"):
        moeint4.explain("int8", num_experts=8, hidden_size=256, intermediate_size=128)


def test_a_library_missing_a_symbol_is_named():
    class Partial:
        moeint4_version = _loader.lib().moeint4_version

    assert _abi.bind(Partial(), lambda *a: None) == "moeint4_version_string"
