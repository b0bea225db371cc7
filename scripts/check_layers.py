#!/usr/bin/env python3
"""Checks the layer rules of docs/ARCHITECTURE.md ("Layers").

Without arguments it reads the sources (no build needed) and checks:
  - which folder may include which: src/base < src/layout < src/registry <
    src/checkpoint < src/core < src/backends/<name>; a folder includes only itself and the
    folders below it; one backend never includes another;
  - a plugin backend (a folder under src/backends/ with its own
    CMakeLists.txt: a separate shared object) includes only its own files and
    the public headers, never src/;
  - built-in code names its includes by their path from src/ ("base/error.h");
  - a header's include guard spells its path: src/base/error.h has
    MOEINT4_BASE_ERROR_H, src/backends/cpu/cpu_pool.h
    MOEINT4_BACKENDS_CPU_CPU_POOL_H (include/moeint4.h: MOEINT4_H);
  - include/moeint4.h (the user's header) includes no other header of ours,
    include/moeint4_backend.h only moeint4.h;
  - tools/ (the installed `moeint4` command, and tools/synth, its synthetic
    layers and reference) includes only include/ and tools/, never tests/ or
    src/; the test kit (tests/kit) never includes src/;
  - no include loops anywhere (src/, include/, tools/, tests/, bench/).

With --objects BUILD_DIR it also reads the object files of a build with nm and
fails when source files call each other in a loop (a.c uses a symbol of b.c
and b.c one of a.c, or a longer ring), within the library, each plugin and
tools/.

Exit status 0 when every rule holds, 1 with one line per violation.
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# Call loops known and being removed by other work, reported but not failed:
# (target, sorted files of the loop). An entry that no longer matches is
# reported as stale so it gets deleted.
KNOWN_CALL_LOOPS = set()
LAYERS = ["base", "layout", "registry", "checkpoint", "core", "backends"]
PUBLIC = {"moeint4.h": [], "moeint4_backend.h": ["moeint4.h"]}
SOURCE_EXTENSIONS = (".c", ".h", ".hip", ".cpp")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rel(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def source_files(top):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d not in ("data", "corpus", "results")]
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXTENSIONS):
                yield rel(os.path.join(dirpath, name))


def quoted_includes(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    # Comments may quote an include line; only code counts.
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return INCLUDE_RE.findall(text)


def exists(path):
    return os.path.isfile(os.path.join(ROOT, path))


def backend_folder(path):
    """'src/backends/hip' for a file inside it, else None."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[0] == "src" and parts[1] == "backends":
        return "/".join(parts[:3])
    return None


def is_plugin(folder):
    return folder is not None and exists(folder + "/CMakeLists.txt")


def layer_of(path):
    """Index in LAYERS of a file under src/, else None."""
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def resolve(path, name):
    """The file `name` (as written in `path`'s #include) refers to, or None."""
    here = os.path.dirname(path)
    if name in PUBLIC:
        return "include/" + name
    candidates = [os.path.normpath(os.path.join(here, name)).replace(os.sep, "/")]
    if path.startswith("src/"):
        candidates.append("src/" + name)
    else:
        candidates += ["src/" + name, "include/" + name, "tests/kit/" + name, "tools/" + name,
                       "tools/synth/" + name]
    for candidate in candidates:
        if exists(candidate):
            return candidate
    return None  # a system or generated header (hip_runtime.h, CL/cl.h, ...)


def check_include(path, name, target, problems):
    def bad(why):
        problems.append(f'{path}: #include "{name}": {why}')

    if path.startswith("include/"):
        allowed = PUBLIC.get(os.path.basename(path), [])
        if target and name not in allowed:
            bad("a public header includes only " + (", ".join(allowed) or "system headers"))
        return
    if path.startswith("tools/"):
        if target and target.startswith("tests/"):
            bad("the installed command must not use the test kit or other test code")
        elif target and path.startswith("tools/synth/") and not (
                target.startswith("tools/synth/") or target.startswith("include/")):
            bad("tools/synth uses the library through include/ only")
        elif target and target.startswith("src/"):
            bad("the command uses the library through include/ only")
        return
    if path.startswith("tests/kit/"):
        if target and target.startswith("src/"):
            bad("the test kit uses the library through include/ only (its reference must share "
                "no code with what it checks)")
        return
    if not path.startswith("src/"):
        return  # tests/ and bench/ may reach anything (internal tests)
    if target is None:
        if "/" in name:
            bad("no such file under src/")
        return
    if target.startswith("include/"):
        return
    if not target.startswith("src/"):
        bad("library code includes only src/ and include/")
        return
    folder = backend_folder(path)
    if is_plugin(folder):
        if not target.startswith(folder + "/"):
            bad(f"a plugin ({folder}) includes only its own files and include/")
        return
    if "/" not in name:
        bad(f'built-in code names includes from src/ ("{rel(os.path.dirname(os.path.join(ROOT, target)))[4:]}/{name}")')
    mine, theirs = layer_of(path), layer_of(target)
    if mine is None or theirs is None:
        bad("file outside the layer folders")
        return
    if theirs > mine:
        bad(f"{LAYERS[mine]}/ must not include {LAYERS[theirs]}/ (a folder includes only folders below it)")
    target_backend = backend_folder(target)
    if folder and target_backend and target_backend != folder:
        bad(f"one backend includes another ({target_backend})")


def find_cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return result


GUARD_RE = re.compile(r"^\s*#\s*ifndef\s+(\w+)", re.M)


def expected_guard(path):
    inside = path.split("/", 1)[1]  # drop src/ or include/
    return "MOEINT4_" + re.sub(r"[^A-Z0-9]", "_", inside.upper()) if inside != "moeint4.h" \
        else "MOEINT4_H"


def check_guard(path, problems):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as handle:
        match = GUARD_RE.search(handle.read())
    want = "MOEINT4_BACKEND_H" if path == "include/moeint4_backend.h" else expected_guard(path)
    if not match or match.group(1) != want:
        problems.append(f"{path}: include guard {match.group(1) if match else '(none)'}, "
                        f"expected {want} (guards spell the path)")


def check_sources(problems):
    for top in ("include", "src"):
        for path in source_files(top):
            if path.endswith(".h"):
                check_guard(path, problems)
    edges = defaultdict(set)
    for top in ("include", "src", "tools", "tests", "bench"):
        for path in source_files(top):
            for name in quoted_includes(path):
                target = resolve(path, name)
                check_include(path, name, target, problems)
                if target and target != path:
                    edges[path].add(target)
    for cycle in find_cycles(edges):
        problems.append("include loop: " + " <-> ".join(cycle))


def object_source(build_dir, obj):
    """src/core/context.c for BUILD/src/CMakeFiles/t.dir/core/context.c.o."""
    relative = os.path.relpath(obj, build_dir).replace(os.sep, "/")
    match = re.match(r"(?:(.*)/)?CMakeFiles/([^/]+)\.dir/(.*)\.o$", relative)
    if not match:
        return None, None
    return match.group(2), os.path.normpath(os.path.join(match.group(1) or "", match.group(3)))


def nm_symbols(objects):
    """{object: (defined, used)} read with one nm run over all of them."""
    result = {obj: (set(), set()) for obj in objects}
    if not objects:
        return result
    run = subprocess.run(["nm", "-A", "-P", *objects], capture_output=True, text=True)
    if run.returncode != 0:  # an unread object would hide its calls: no loop found, wrongly
        sys.exit(f"check_layers: nm failed ({run.returncode}) on the objects:\n{run.stderr}")
    output = run.stdout
    for line in output.splitlines():
        # "path/to/file.o: symbol type [value size]"
        obj, _, rest = line.partition(": ")
        fields = rest.split()
        if obj not in result or len(fields) < 2:
            continue
        symbol, kind = fields[0], fields[1]
        if kind == "U":
            result[obj][1].add(symbol)
        elif kind in "TDBRCVWGS":
            result[obj][0].add(symbol)
    return result


def check_objects(build_dir, problems, notes):
    groups = defaultdict(dict)  # target -> source -> (defined, used)
    found = {}  # object -> (target, source)
    for dirpath, _, filenames in os.walk(build_dir):
        for name in filenames:
            if not name.endswith(".o"):
                continue
            obj = os.path.join(dirpath, name)
            target, source = object_source(build_dir, obj)
            # An object whose source is gone (moved or deleted since that
            # build) is stale and says nothing about the tree.
            if source and (source.startswith("src/") or source.startswith("tools/")) and \
                    exists(source):
                found[obj] = (target, source)
    for obj, symbols in nm_symbols(sorted(found)).items():
        target, source = found[obj]
        groups[target][source] = symbols
    seen_known = set()
    if not groups:
        problems.append(f"{build_dir}: no object files of src/ or tools/ found (build first)")
    for target, files in sorted(groups.items()):
        owner = {}
        for source, (defined, _) in files.items():
            for symbol in defined:
                owner[symbol] = source
        edges = defaultdict(set)
        for source, (_, used) in files.items():
            for symbol in used:
                if symbol in owner and owner[symbol] != source:
                    edges[source].add(owner[symbol])
        for cycle in find_cycles(edges):
            words = f"call loop in {target}: " + " <-> ".join(cycle)
            if (target, tuple(cycle)) in KNOWN_CALL_LOOPS:
                seen_known.add((target, tuple(cycle)))
                notes.append("known " + words)
            else:
                problems.append(words)
    for target, cycle in sorted(KNOWN_CALL_LOOPS - seen_known):
        if target in groups:
            notes.append(f"stale entry of KNOWN_CALL_LOOPS (no such loop now, delete it): {target}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", metavar="BUILD_DIR",
                        help="also check the object files of this build for call loops")
    parser.add_argument("--root", help="the source tree to check (default: this script's)")
    args = parser.parse_args()
    global ROOT
    if args.root:
        ROOT = os.path.abspath(args.root)
    problems, notes = [], []
    check_sources(problems)
    if args.objects:
        check_objects(os.path.abspath(args.objects), problems, notes)
    for note in notes:
        print("note: " + note)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} violation(s) of docs/ARCHITECTURE.md's layer rules")
        return 1
    print("check_layers: layer rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
