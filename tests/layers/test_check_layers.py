"""scripts/check_layers.py catches what it is meant to: each case builds a
small source tree in a temporary folder with one violation and expects a
failure naming it; the clean tree passes."""
import os
import shutil
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check_layers.py")

def header(guard, body):
    return f"#ifndef {guard}\n#define {guard}\n{body}#endif\n"


CLEAN = {
    "include/moeint4.h": header("MOEINT4_H", "#include <stddef.h>\n"),
    "include/moeint4_backend.h": header("MOEINT4_BACKEND_H", '#include "moeint4.h"\n'),
    "src/base/error.h": header("MOEINT4_BASE_ERROR_H", '#include "moeint4.h"\n'),
    "src/layout/layout.h": header("MOEINT4_LAYOUT_LAYOUT_H", '#include "base/error.h"\n'),
    "src/registry/registry.h": header("MOEINT4_REGISTRY_REGISTRY_H",
                                      '#include "moeint4_backend.h"\n#include "layout/layout.h"\n'),
    "src/core/handles.h": header("MOEINT4_CORE_HANDLES_H", '#include "registry/registry.h"\n'),
    "src/backends/cpu/cpu.c": '#include "core/handles.h"\n#include "backends/cpu/cpu.h"\n',
    "src/backends/cpu/cpu.h": header("MOEINT4_BACKENDS_CPU_CPU_H", '#include "base/error.h"\n'),
    "src/backends/gpu/CMakeLists.txt": "# a plugin\n",
    "src/backends/gpu/gpu.c": '#include "gpu.h"\n#include "moeint4_backend.h"\n',
    "src/backends/gpu/gpu.h": header("MOEINT4_BACKENDS_GPU_GPU_H", "#include <stdint.h>\n"),
    "tools/cli.c": '#include "moeint4.h"\n#include "synth.h"\n',
    "tools/synth/synth.h": '#include "moeint4.h"\n',
    "tests/kit/kit.h": '#include "moeint4.h"\n',
    "tests/core/test.c": '#include "kit.h"\n#include "core/handles.h"\n',
}

CASES = [
    ("a guard that does not spell the path",
     {"src/backends/gpu/gpu.h": header("MOEINT4_GPU_H", "")},
     "src/backends/gpu/gpu.h: include guard MOEINT4_GPU_H, expected MOEINT4_BACKENDS_GPU_GPU_H"),
    ("base includes core", {"src/base/error.h": '#include "core/handles.h"\n'},
     "base/ must not include core/"),
    ("layout includes registry", {"src/layout/layout.h": '#include "registry/registry.h"\n'},
     "layout/ must not include registry/"),
    ("a plugin includes src", {"src/backends/gpu/gpu.c": '#include "base/error.h"\n'},
     "a plugin (src/backends/gpu) includes only its own files"),
    ("one backend includes another",
     {"src/backends/cpu/cpu.c": '#include "backends/gpu/gpu.h"\n'}, "one backend includes another"),
    ("bare include in built-in code",
     {"src/layout/layout.h": header("MOEINT4_LAYOUT_LAYOUT_H", '#include "error.h"\n'),
      "src/layout/error.h": header("MOEINT4_LAYOUT_ERROR_H", "")}, "names includes from src/"),
    ("the user's header includes the backend header",
     {"include/moeint4.h": '#include "moeint4_backend.h"\n'}, "a public header includes only"),
    ("the command includes the test kit", {"tools/cli.c": '#include "kit.h"\n'},
     "must not use the test kit"),
    ("the command includes library internals", {"tools/cli.c": '#include "core/handles.h"\n'},
     "the command uses the library through include/ only"),
    ("the test kit includes library internals",
     {"tests/kit/kit.h": '#include "base/error.h"\n'}, "the test kit uses the library through"),
    ("include loop", {"src/core/a.h": header("MOEINT4_CORE_A_H", '#include "core/b.h"\n'),
                      "src/core/b.h": header("MOEINT4_CORE_B_H", '#include "core/a.h"\n')},
     "include loop: src/core/a.h <-> src/core/b.h"),
]


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)


def run(root, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--root", root, *extra], capture_output=True,
                          text=True)


def call_loop_case(root, failures):
    """Two objects of one target that call each other: a call loop."""
    build = os.path.join(root, "build")
    objects = os.path.join(build, "src", "CMakeFiles", "t.dir", "core")
    os.makedirs(objects)
    os.makedirs(os.path.join(root, "src", "core"), exist_ok=True)
    sources = {"ping.c": "int pong(int);\nint ping(int n) { return n ? pong(n - 1) : 0; }\n",
               "pong.c": "int ping(int);\nint pong(int n) { return n ? ping(n - 1) : 1; }\n"}
    for name, text in sources.items():
        source = os.path.join(root, "src", "core", name)
        with open(source, "w") as handle:
            handle.write(text)
        subprocess.run(["cc", "-c", source, "-o", os.path.join(objects, name + ".o")], check=True)
    result = run(root, "--objects", build)
    if result.returncode != 1 or "call loop in t: src/core/ping.c <-> src/core/pong.c" not in result.stdout:
        failures.append(f"call loop not caught: rc={result.returncode}\n{result.stdout}")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, CLEAN)
        result = run(root)
        if result.returncode != 0:
            failures.append(f"clean tree refused:\n{result.stdout}{result.stderr}")
        for name, change, words in CASES:
            case_root = os.path.join(root, "case")
            shutil.rmtree(case_root, ignore_errors=True)
            write_tree(case_root, {**CLEAN, **change})
            result = run(case_root)
            if result.returncode != 1 or words not in result.stdout:
                failures.append(f"{name}: rc={result.returncode}, expected \"{words}\" in:\n"
                                f"{result.stdout}{result.stderr}")
        if shutil.which("cc") and shutil.which("nm"):
            call_root = os.path.join(root, "calls")
            write_tree(call_root, CLEAN)
            call_loop_case(call_root, failures)
        else:
            failures.append("no cc/nm to build the call-loop case")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{len(CASES) + 2 - len(failures)} of {len(CASES) + 2} cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
