#!/usr/bin/env python3
"""No compile line of the build may hold a path of this clone in a definition.

ccache keys an object on its compiler arguments. Include paths it makes relative (CCACHE_BASEDIR,
CMakeLists.txt), but a -D holding an absolute path ties the object's cache entry to one clone of
the tree: every CI run, which builds in a fresh clone, compiled such files again. Two files carry
the paths for everyone (core/common/resources.cpp, tests/common/test_paths.cpp); this check, run by
CTest as check_compile_lines, fails on any other.

Usage: scripts/check_compile_lines.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import shlex
import sys

ALLOWED = {"core/common/resources.cpp", "tests/common/test_paths.cpp"}


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build, source = (os.path.realpath(a) for a in sys.argv[1:])
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_compile_lines: {path}: {e} (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)",
              file=sys.stderr)
        return 1
    if not isinstance(entries, list) or not entries:
        print(f"check_compile_lines: {path}: expected a non-empty list of compile commands", file=sys.stderr)
        return 1
    bad = []
    for e in entries:
        args = e.get("arguments") or shlex.split(e.get("command", ""))
        rel = os.path.relpath(os.path.realpath(e.get("file", "")), source)
        if rel in ALLOWED:
            continue
        for a in args:
            if not a.startswith("-D") or "=" not in a:
                continue
            value = a.split("=", 1)[1].strip("\"'")
            if value == source or value.startswith(source + "/"):
                bad.append(f"{rel}: {a}")
    if bad:
        print("check_compile_lines: definitions holding this clone's path (move them into "
              + " or ".join(sorted(ALLOWED)) + "):", file=sys.stderr)
        for b in bad[:40]:
            print("  " + b, file=sys.stderr)
        return 1
    print(f"check_compile_lines: {len(entries)} compile lines, none holds a path of this clone in a definition")
    return 0


if __name__ == "__main__":
    sys.exit(main())
