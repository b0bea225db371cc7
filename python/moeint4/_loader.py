"""Finds and loads libmoeint4.so, binds the ABI table and checks the version.

Search order (the first that loads wins):
  1. $MOEINT4_LIBRARY: a path to the library. When set it is the only place
     tried, so a wrong path is reported rather than papered over.
  2. Next to the package: moeint4/libmoeint4.so (a bundled copy); in a source
     tree (python/moeint4 of the repository) also <repo>/build/lib.
  3. The installation prefix the package sits in (<prefix>/lib/pythonX.Y/
     site-packages/moeint4 -> <prefix>/lib, lib64, lib/<multiarch>): where
     `cmake --install --prefix <prefix>` puts the library.
  4. The system loader, as a C program linked with -lmoeint4 would find it:
     the folders of $LD_LIBRARY_PATH, then ld.so.cache and the default folders
     (`cmake --install` to /usr/local needs `ldconfig` afterwards).
  5. pkg-config: the libdir of `pkg-config moeint4` ($PKG_CONFIG_PATH may name
     <prefix>/lib/pkgconfig).
A failure lists each place that applied and why it did not load.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
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


def _install_prefix(package_dir: Path) -> Optional[Path]:
    """<prefix> when the package is installed as <prefix>/lib*/python*/
    {site,dist}-packages/moeint4, else None."""
    parents = package_dir.parents
    if (len(parents) >= 4 and parents[0].name in ("site-packages", "dist-packages")
            and parents[1].name.startswith("python") and parents[2].name.startswith("lib")):
        return parents[3]
    return None


def candidate_paths(package_dir: Path = _PACKAGE_DIR) -> List[Path]:
    """Files next to the package that may hold the library, most specific first:
    the bundled copy, the source tree's build (only inside a source tree) and
    the lib folders of the package's installation prefix that exist."""
    paths = [package_dir / "libmoeint4.so"]
    repo = package_dir.parent.parent
    if package_dir.parent.name == "python" and (repo / "include" / "moeint4.h").exists():
        paths.append(repo / "build" / "lib" / "libmoeint4.so")
    prefix = _install_prefix(package_dir)
    if prefix is not None:
        paths += [d / SONAME for d in _prefix_lib_dirs(prefix) if d.is_dir()]
    unique: List[Path] = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def _try_load(target: str, tried: List[str], where: str = "") -> Optional[ctypes.CDLL]:
    try:
        return ctypes.CDLL(target)
    except OSError as exc:
        tried.append(f"  {where or target}: {exc}")
        return None


def _loaded_file(name: str) -> str:
    """The file the dynamic loader mapped for `name` (from /proc/self/maps),
    or `name` when it cannot be told."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path) == name or path.endswith("/" + name):
                    return path
    except OSError:
        pass
    return name


def _pkg_config_libdir(environ: Any, tried: List[str]) -> Optional[Path]:
    tool = shutil.which("pkg-config", path=environ.get("PATH"))
    if tool is None:
        tried.append("  pkg-config: not installed")
        return None
    try:
        result = subprocess.run([tool, "--variable=libdir", "moeint4"], env=dict(environ),
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        tried.append(f"  pkg-config moeint4: {exc}")
        return None
    libdir = result.stdout.strip()
    if result.returncode != 0 or not libdir:
        where = environ.get("PKG_CONFIG_PATH")
        tried.append("  pkg-config moeint4: no moeint4.pc " +
                     (f"(PKG_CONFIG_PATH={where})" if where else
                      "(set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig for a prefix of your own)"))
        return None
    return Path(os.path.normpath(libdir))  # ${pcfiledir}/../../lib -> <prefix>/lib


def find_and_load(environ: Any = os.environ,
                  package_dir: Path = _PACKAGE_DIR) -> Tuple[ctypes.CDLL, str]:
    """Loads the library; returns (handle, the file it came from)."""
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
    # The system loader: LD_LIBRARY_PATH's folders, then ld.so.cache and the
    # default folders (what dlopen of the SONAME searches).
    missing = []
    for folder in (d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d):
        path = Path(folder) / SONAME
        if not path.exists():
            missing.append(folder)
            continue
        lib = _try_load(str(path), tried)
        if lib is not None:
            return lib, str(path)
    if missing:
        tried.append(f"  LD_LIBRARY_PATH: no {SONAME} in " + ", ".join(missing))
    names = [SONAME]
    found = ctypes.util.find_library("moeint4")  # ld.so.cache (ldconfig -p), then ld/gcc
    if found and found not in names:
        names.append(found)
    for name in names:
        lib = _try_load(name, tried, f"the system loader ({name}: ld.so.cache and the default "
                                     "folders; after `cmake --install` to a system prefix run "
                                     "`ldconfig`)")
        if lib is not None:
            return lib, _loaded_file(name)
    libdir = _pkg_config_libdir(environ, tried)
    if libdir is not None:
        for name in (SONAME, "libmoeint4.so"):
            lib = _try_load(str(libdir / name), tried)
            if lib is not None:
                return lib, str(libdir / name)
    raise LibraryNotFoundError(
        "cannot find libmoeint4; tried, in order:\n" + "\n".join(tried) +
        f"\nSet {LIBRARY_ENV}=/path/to/libmoeint4.so (e.g. build/lib/libmoeint4.so), or "
        "`cmake --install` it onto the loader path (then `ldconfig`), or add its folder to "
        "LD_LIBRARY_PATH, or its pkgconfig folder to PKG_CONFIG_PATH.")


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
