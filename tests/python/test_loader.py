"""Where the library is looked for, and what the error says when it is not found."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import package_copy


def _import_in(tmp_path, env_extra):
    """Imports a copy of the package (nothing next to it) in a fresh process."""
    site = package_copy(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k not in ("MOEINT4_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(site)
    code = "import moeint4\ntry:\n    moeint4.backends()\nexcept ImportError as e:\n    print(type(e).__name__)\n    print(e)\nelse:\n    print('LOADED', moeint4.library_path())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=tmp_path, check=True).stdout


def test_not_found_lists_every_place_tried(tmp_path):
    out = _import_in(tmp_path, {"PKG_CONFIG_PATH": ""})
    if out.startswith("LOADED"):
        import pytest
        pytest.skip(f"a libmoeint4 is installed on this machine: {out}")
    assert out.startswith("LibraryNotFoundError")
    assert str(tmp_path / "site" / "moeint4" / "libmoeint4.so") in out
    assert "the system loader (libmoeint4.so.0" in out and "ldconfig" in out
    assert "pkg-config" in out and "MOEINT4_LIBRARY" in out
    # Not in a source tree: no build folder of a repository is listed.
    assert "build" not in out.split("Set MOEINT4_LIBRARY")[0]


def test_not_found_in_a_venv_lists_only_places_that_exist(tmp_path):
    """<venv>/lib/pythonX.Y/site-packages/moeint4: <venv>/lib is listed (where
    `cmake --install --prefix <venv>` would put the library), nothing under
    lib/pythonX.Y/ and no lib folder that does not exist."""
    venv = tmp_path / "venv"
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    package_copy(site)
    env = {k: v for k, v in os.environ.items() if k not in ("MOEINT4_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(PYTHONPATH=str(site), PKG_CONFIG_PATH="")
    code = "import moeint4\ntry:\n    moeint4.backends()\nexcept ImportError as e:\n    print(e)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout
    if not out.startswith("cannot find"):
        import pytest
        pytest.skip(f"a libmoeint4 is installed on this machine: {out}")
    places = [line.strip().split(": ")[0] for line in out.splitlines() if line.startswith("  ")]
    assert str(venv / "lib" / "libmoeint4.so.0") in places
    assert str(site / "moeint4" / "libmoeint4.so") in places
    assert not any("python3" in p and "build" in p for p in places), places
    assert str(venv / "lib64" / "libmoeint4.so.0") not in places  # no such folder


def test_explicit_path_is_the_only_place_tried(tmp_path):
    out = _import_in(tmp_path, {"MOEINT4_LIBRARY": str(tmp_path / "nowhere" / "libmoeint4.so")})
    assert out.startswith("LibraryNotFoundError")
    assert "nowhere/libmoeint4.so" in out and "unset MOEINT4_LIBRARY" in out
    assert "the system loader" not in out and "pkg-config" not in out


def test_explicit_path_loads(tmp_path):
    library = os.environ["MOEINT4_LIBRARY"]
    out = _import_in(tmp_path, {"MOEINT4_LIBRARY": library})
    assert out.strip() == f"LOADED {library}"


def test_library_in_package_and_on_loader_path(tmp_path):
    library = Path(os.environ["MOEINT4_LIBRARY"]).resolve()
    bundled = package_copy(tmp_path / "bundle")
    shutil.copy(library, bundled / "moeint4" / "libmoeint4.so")
    env = {k: v for k, v in os.environ.items() if k != "MOEINT4_LIBRARY"}
    code = "import moeint4; moeint4.backends(); print(moeint4.library_path())"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(bundled)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(bundled / "moeint4" / "libmoeint4.so")
    # The system loader: LD_LIBRARY_PATH holding libmoeint4.so.0.
    loader_dir = tmp_path / "loader"
    loader_dir.mkdir()
    shutil.copy(library, loader_dir / "libmoeint4.so.0")
    site = package_copy(tmp_path / "plain")
    out = subprocess.run([sys.executable, "-c", code],
                         env={**env, "PYTHONPATH": str(site), "LD_LIBRARY_PATH": str(loader_dir)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(loader_dir / "libmoeint4.so.0")  # its folder, tried as a path


def test_installed_prefix_tree(tmp_path):
    """<prefix>/lib/pythonX.Y/site-packages/moeint4 finds <prefix>/lib/libmoeint4.so.0,
    where `cmake --install --prefix <prefix>` puts it."""
    library = Path(os.environ["MOEINT4_LIBRARY"]).resolve()
    prefix = tmp_path / "prefix"
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    package_copy(site)
    shutil.copy(library, prefix / "lib" / "libmoeint4.so.0")
    env = {k: v for k, v in os.environ.items() if k not in ("MOEINT4_LIBRARY", "LD_LIBRARY_PATH")}
    code = "import moeint4; moeint4.backends(); print(moeint4.library_path())"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(site)},
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert out.strip() == str(prefix / "lib" / "libmoeint4.so.0")
