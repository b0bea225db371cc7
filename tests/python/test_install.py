"""`pip install ./python` offline, with pip's default isolated build (the
package's own standard-library build backend needs nothing from an index),
then the example runs from the installed package."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, package_copy

SONAME = "libmoeint4.so.0"


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


# ---- the library installed with `cmake --install`, found without MOEINT4_LIBRARY ----

def _build_dir():
    """The CMake build folder of the library under test (MOEINT4_LIBRARY is
    <build>/lib/libmoeint4.so in ctest)."""
    library = os.environ.get("MOEINT4_LIBRARY")
    build = Path(library).resolve().parent.parent if library else None
    if build is None or not (build / "CMakeCache.txt").exists():
        pytest.skip("MOEINT4_LIBRARY does not point into a CMake build folder to install")
    return build


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(prefix, libdir) after `cmake --install <build> --prefix <prefix>`."""
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    result = subprocess.run(["cmake", "--install", str(_build_dir()), "--prefix", str(prefix)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    libraries = sorted(prefix.rglob(SONAME))
    assert len(libraries) == 1, libraries
    return prefix, libraries[0].parent


def _load(tmp_path, site, **env_extra):
    """Imports the package at `site` in a fresh process with no MOEINT4_LIBRARY
    and no inherited loader/pkg-config paths; returns what it printed."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MOEINT4_LIBRARY", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
    env.update(env_extra, PYTHONPATH=str(site), PKG_CONFIG_PATH=env_extra.get("PKG_CONFIG_PATH", ""))
    code = ("import moeint4\ntry:\n    print('LOADED', moeint4.library_path(), "
            "moeint4.library_version())\nexcept ImportError as e:\n    print(e)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=tmp_path, check=True).stdout


def test_installed_prefix_is_found_from_the_package_in_it(tmp_path, installed):
    prefix, libdir = installed
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = package_copy(prefix / "lib" / version / "site-packages")
    out = _load(tmp_path, site)
    assert out.startswith(f"LOADED {libdir / SONAME} "), out


def test_installed_prefix_is_found_through_ld_library_path(tmp_path, installed):
    _, libdir = installed
    out = _load(tmp_path, package_copy(tmp_path / "elsewhere"), LD_LIBRARY_PATH=str(libdir))
    assert out.startswith(f"LOADED {libdir / SONAME} "), out


def test_installed_prefix_is_found_through_pkg_config(tmp_path, installed):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    _, libdir = installed
    pc_files = sorted(installed[0].rglob("moeint4.pc"))
    assert len(pc_files) == 1, pc_files
    out = _load(tmp_path, package_copy(tmp_path / "elsewhere"),
                PKG_CONFIG_PATH=str(pc_files[0].parent))
    if out.startswith("LOADED") and str(libdir) not in out:
        pytest.skip(f"a system-wide libmoeint4 was found first: {out}")
    assert out.startswith(f"LOADED {libdir / SONAME} "), out


def test_not_installed_error_names_only_sensible_places(tmp_path, installed):
    site = package_copy(tmp_path / "elsewhere")
    out = _load(tmp_path, site)
    if out.startswith("LOADED"):
        pytest.skip(f"a system-wide libmoeint4 is installed: {out}")
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert lines[0].startswith(f"  {site / 'moeint4' / 'libmoeint4.so'}: not found")
    assert any(line.startswith("  the system loader") for line in lines)
    assert any(line.startswith("  pkg-config") for line in lines)
    assert len(lines) == 3, out
