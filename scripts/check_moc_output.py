#!/usr/bin/env python3
"""Check that cmake/moc_project_includes (moc without LibTorch's and the compiler's include folders)
generates exactly the code that moc generates with a target's whole include path, for every file
AUTOMOC gives moc in a configured and built tree. Prints the wall time of both, summed.

Usage: scripts/check_moc_output.py [--sample N] [BUILD_DIR]   (default build/release; run after a
build, which writes the moc_predefs.h files). Exits non-zero on any difference, or if a target's
AUTOMOC does not go through moc_project_includes. About 5 s per file with the whole include
path, so minutes for a whole tree; CTest's check_moc_output compares --sample 3 (the first, middle
and last input) and checks every target's moc; the whole tree's result is in BENCHMARKS.md.
"""
import concurrent.futures
import functools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time


def moc_jobs(build):
    for info_path in sorted(build.rglob("*_autogen.dir/AutogenInfo.json")):
        info = json.loads(info_path.read_text())
        includes = info["MOC_INCLUDES"]
        base = ["-D" + d for d in info["MOC_DEFINITIONS"]] + list(info.get("MOC_OPTIONS") or [])
        predefs = info.get("MOC_PREDEFS_FILE")
        if predefs and os.path.exists(predefs):
            base += ["--include", predefs]
        for entry in info.get("HEADERS", []) + info.get("SOURCES", []):
            path, flags = entry[0], entry[1]
            if "M" in flags:
                yield info_path.parent.name, info["QT_MOC_EXECUTABLE"], includes, base, path


@functools.lru_cache(maxsize=None)
def real_moc(wrapper):
    """The moc that the generated wrapper execs (its last line: exec "MOC" "$@")."""
    for line in pathlib.Path(wrapper).read_text().splitlines():
        if line.startswith('exec "'):
            return line.split('"')[1]
    sys.exit(f"{wrapper}: no exec line naming moc")


def run(job, tmp):
    target, wrapper, includes, base, path = job
    outputs, seconds = [], []
    for i, exe in enumerate([real_moc(wrapper), wrapper]):
        out = os.path.join(tmp, f"{abs(hash((target, path)))}-{i}.moc")
        t0 = time.monotonic()
        r = subprocess.run([exe] + ["-I" + d for d in includes] + base + [path, "-o", out],
                           capture_output=True, text=True)
        seconds.append(time.monotonic() - t0)
        if r.returncode != 0:
            return target, path, f"moc failed ({exe}): {r.stderr.strip()[:300]}", seconds
        outputs.append(pathlib.Path(out).read_bytes() if os.path.exists(out) else b"")
    return target, path, None if outputs[0] == outputs[1] else "generated code differs", seconds


def main():
    args = sys.argv[1:]
    sample = 0
    if args[:1] == ["--sample"] and len(args) >= 2 and args[1].isdigit():
        sample, args = int(args[1]), args[2:]
    build = pathlib.Path(args[0] if args else "build/release").resolve()
    jobs = list(moc_jobs(build))
    if not jobs:
        sys.exit(f"{build}: no AutogenInfo.json with moc inputs (configure and build it first)")
    plain = sorted({f"{j[0]} ({j[1]})" for j in jobs if not j[1].endswith("/moc_project_includes")})
    if plain:
        sys.exit(f"{build}: AUTOMOC without moc_project_includes (use grpo_automoc()): " + ", ".join(plain))
    if sample and len(jobs) > sample:
        # the sample from inputs that declare classes (a precompiled header has none)
        jobs = [j for j in jobs if not j[4].endswith("cmake_pch.hxx")]
        jobs = [jobs[round(i * (len(jobs) - 1) / max(sample - 1, 1))] for i in range(sample)]
    failures, full, wrapped = 0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for target, path, problem, seconds in pool.map(lambda j: run(j, tmp), jobs):
            full += seconds[0]
            wrapped += seconds[1] if len(seconds) > 1 else 0
            if problem:
                failures += 1
            if problem or sample:
                print(f"{target}: {path}: {problem or 'same code'}")
    print(f"{len(jobs)} moc inputs in {build}: {failures} differ; moc wall time summed: "
          f"whole include path {full:.0f} s, moc_project_includes {wrapped:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
