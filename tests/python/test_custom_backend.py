"""A backend written in Python and registered through moeint4_register_backend:
the plugin table's structs and callback types in _abi against the real core."""
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO

SCRIPT = Path(__file__).resolve().parent / "custom_backend_script.py"


def test_python_backend_through_the_plugin_table():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    r = json.loads(run.stdout)
    assert r["id"] >= 16 and "pybackend" in r["names"] and r["names"][-1] == "pybackend"
    assert r["backend"] == "pybackend" and r["out_ok"]
    # prepare saw the descriptor: E, E_local, K, N, group, GPTQ_SYM
    assert r["seen"]["prepare"][0] == [0x1234, 4, 4, 128, 64, 64, 1]
    # forward saw the arguments: weights handle, F32, M, topk, SWIGLU_CLAMP, limit, on-input
    assert r["seen"]["forward"][0] == [0x5678, 1, 3, 2, 2, 5.0, 1]
    assert r["error"] == ["MOEINT4_UNSUPPORTED", r["error"][1]]
    assert "pybackend: gelu is not here" in r["error"][1]
    assert r["refusal"][0] in ("MOEINT4_UNSUPPORTED", "MOEINT4_BACKEND_UNAVAILABLE")
    assert "no group size 32" in r["refusal"][1]
    assert r["seen"]["release"] == 1 and r["seen"]["destroy"] == 1
