"""Finds and loads libmoeint4.so, binds the ABI table and checks the version.

Search order (the first that loads wins):
  1. $MOEINT4_LIBRARY: a path to the library. When set it is the only place
     tried, so a wrong path is reported rather than papered over.
  2. Next to the package: moeint4/libmoeint4.so (a bundled copy), the source
     tree's build/lib/ (python/moeint4 -> <repo>/build/lib), and the lib
     folders of the installation prefix the package sits in (and sys.prefix).
  3. The system loader: ctypes.util.find_library("moeint4"), then
     "libmoeint4.so.0" (LD_LIBRARY_PATH, ld.so.cache: `cmake --install` puts
     the library in <prefix>/lib; run `ldconfig` afterwards for /usr/local).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple

from . import _abi
from ._version import __version__
from .errors import LibraryNotFoundError, MoeInt4Error, VersionMismatchError

LIBRARY_ENV = "MOEINT4_LIBRARY"
SONAME = "libmoeint4.so.0"
_PACKAGE_DIR = Path(__file__).resolve().parent


def _prefix_lib_dirs(prefix: Path) -> List[Path]:
    dirs = [prefix / "lib", prefix / "lib64"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(prefix / "lib" / multiarch)
    return dirs


def candidate_paths(package_dir: Path = _PACKAGE_DIR) -> List[Path]:
    """Files next to the package that may hold the library, most specific first."""
    paths = [package_dir / "libmoeint4.so", package_dir.parent.parent / "build" / "lib" / "libmoeint4.so"]
    prefixes: List[Path] = []
    # <prefix>/lib/pythonX.Y/site-packages/moeint4 -> <prefix>
    if len(package_dir.parents) >= 4 and package_dir.parent.name in ("site-packages", "dist-packages"):
        prefixes.append(package_dir.parents[3])
    prefixes.append(Path(sys.prefix))
    for prefix in prefixes:
        for lib_dir in _prefix_lib_dirs(prefix):
            paths.append(lib_dir / SONAME)
    unique: List[Path] = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def _try_load(target: str, tried: List[str]) -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(target)
    except OSError as exc:
        tried.append(f"  {target}: {exc}")
        return None


def find_and_load(environ: Any = os.environ,
                  package_dir: Path = _PACKAGE_DIR) -> Tuple[ctypes.CDLL, str]:
    """Loads the library; returns (handle, where it came from)."""
    tried: List[str] = []
    explicit = environ.get(LIBRARY_ENV)
    if explicit:
        lib = _try_load(explicit, tried)
        if lib is not None:
            return lib, explicit
        raise LibraryNotFoundError(
            f"cannot load libmoeint4 from ${LIBRARY_ENV}:\n" + "\n".join(tried) +
            f"\n(unset {LIBRARY_ENV} to search next to the package and on the loader path)")
    for path in candidate_paths(package_dir):
        if not path.exists():
            tried.append(f"  {path}: not found")
            continue
        lib = _try_load(str(path), tried)
        if lib is not None:
            return lib, str(path)
    system_names = []
    found = ctypes.util.find_library("moeint4")
    if found:
        system_names.append(found)
    else:
        tried.append("  ctypes.util.find_library('moeint4'): nothing")
    if SONAME not in system_names:
        system_names.append(SONAME)
    for name in system_names:
        lib = _try_load(name, tried)
        if lib is not None:
            return lib, name
    raise LibraryNotFoundError(
        "cannot find libmoeint4; tried, in order:\n" + "\n".join(tried) +
        f"\nSet {LIBRARY_ENV}=/path/to/libmoeint4.so (e.g. build/lib/libmoeint4.so), or "
        "`cmake --install` it onto the loader path (then `ldconfig`).")


def _errcheck(result: int, func: Any, args: Any) -> int:
    if result != _abi.SUCCESS:
        message = _LIBRARY.last_error()
        raise MoeInt4Error(result, message, func.__name__)
    return result


def version_tuple(number: int) -> Tuple[int, int, int]:
    return number // 10000, number // 100 % 100, number % 100


def check_version(number: int, package_version: str = __version__) -> None:
    """Major must match; the library's minor must be >= the package's (a
    newer minor only adds functions, an older one may lack some we call)."""
    lib_major, lib_minor, lib_patch = version_tuple(number)
    pkg_major, pkg_minor = (int(part) for part in package_version.split(".")[:2])
    if lib_major != pkg_major or lib_minor < pkg_minor:
        raise VersionMismatchError(
            f"libmoeint4 {lib_major}.{lib_minor}.{lib_patch} does not fit the moeint4 Python "
            f"package {package_version}: needs {pkg_major}.x with x >= {pkg_minor}")


class _Library:
    """The loaded library, bound once per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: Optional[ctypes.CDLL] = None
        self.path: Optional[str] = None

    def get(self) -> ctypes.CDLL:
        if self._lib is None:
            with self._lock:
                if self._lib is None:
                    lib, path = find_and_load()
                    missing = _abi.bind(lib, _errcheck)
                    if missing is not None:
                        raise VersionMismatchError(
                            f"{path} lacks the symbol {missing}: not a matching libmoeint4")
                    check_version(lib.moeint4_version())
                    self.path = path
                    self._lib = lib
        return self._lib

    def last_error(self) -> str:
        raw = self.get().moeint4_last_error()
        return raw.decode("utf-8", "replace") if raw else ""


_LIBRARY = _Library()


def lib() -> ctypes.CDLL:
    """The bound library (loaded on first use)."""
    return _LIBRARY.get()


def library_path() -> str:
    """Where the library was loaded from."""
    _LIBRARY.get()
    return _LIBRARY.path or ""
