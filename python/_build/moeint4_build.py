"""A PEP 517 build backend of the package's own, standard library only.

Why: pip builds in an isolated environment and would download setuptools for
it; this backend needs nothing, so `pip install ./python` works offline (the
package is pure Python: ctypes over libmoeint4.so).
"""
import base64
import hashlib
import os
import re
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "moeint4"


def _version():
    with open(os.path.join(_ROOT, _PACKAGE, "_version.py"), encoding="utf-8") as f:
        match = re.search(r'__version__\s*=\s*"([^"]+)"', f.read())
    if not match:
        raise RuntimeError("moeint4/_version.py has no __version__")
    return match.group(1)


def _metadata(version):
    with open(os.path.join(_ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {_PACKAGE}\n"
        f"Version: {version}\n"
        "Summary: int4 Mixture-of-Experts layers (W4A16) over libmoeint4's C ABI\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.8\n"
        "Requires-Dist: numpy\n"
        "Description-Content-Type: text/markdown\n\n" + readme
    )


def _package_files():
    folder = os.path.join(_ROOT, _PACKAGE)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") or name == "py.typed":
            yield os.path.join(folder, name), f"{_PACKAGE}/{name}"


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist_info = f"{_PACKAGE}-{version}.dist-info"
    wheel_name = f"{_PACKAGE}-{version}-py3-none-any.whl"
    entries = []
    for path, arcname in _package_files():
        with open(path, "rb") as f:
            entries.append((arcname, f.read()))
    entries.append((f"{dist_info}/METADATA", _metadata(version).encode()))
    entries.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: moeint4_build\n"
                    b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = [_record_line(name, data) for name, data in entries]
    record.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data in entries:
            wheel.writestr(arcname, data)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    import tarfile

    version = _version()
    base = f"{_PACKAGE}-{version}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as sdist:
        for rel in ("pyproject.toml", "README.md", "_build/moeint4_build.py"):
            sdist.add(os.path.join(_ROOT, rel), arcname=f"{base}/{rel}")
        for path, arcname in _package_files():
            sdist.add(path, arcname=f"{base}/{arcname}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(version).encode()
        info.size = len(data)
        import io

        sdist.addfile(info, io.BytesIO(data))
    return name
