"""`pip install ./python` offline, with pip's default isolated build (the
package's own standard-library build backend needs nothing from an index),
then the example runs from the installed package."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO


def test_pip_install_then_example_runs(tmp_path):
    if importlib.util.find_spec("pip") is None:
        pytest.skip("python3-pip missing")
    source = tmp_path / "src"  # a copy: the build writes build/ and *.egg-info
    shutil.copytree(REPO / "python", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                    "--no-index", "--quiet", "--target", str(target), str(source)],
                   check=True, capture_output=True, text=True)
    assert (target / "moeint4" / "py.typed").exists()
    env = dict(os.environ, PYTHONPATH=str(target))
    result = subprocess.run([sys.executable, str(REPO / "examples" / "python" / "moe_layer.py"),
                             "--tokens", "8", "--format", "awq", "--group-size", "64"],
                            env=env, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"from {target / 'moeint4'}" in result.stdout
    assert result.stdout.rstrip().endswith("OK")
