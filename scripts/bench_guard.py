#!/usr/bin/env python3
"""The benchmark guard: runs each guarded benchmark and compares its ratio with the figure last
recorded in BENCHMARKS.md ("Guarded ratios"), so a ratio that falls is found by this check and not
by chance. Every guarded figure is a ratio measured in one run on one machine (ours against a
reference, or one mode against another), never a time.

    scripts/bench_guard.py                 run every guarded bench (5 times each, median), then compare
    scripts/bench_guard.py --bench NAME    only these (repeatable)
    scripts/bench_guard.py --from DIR      compare the JSON lines saved in DIR/NAME.json (one per run)
    scripts/bench_guard.py --warn-only     report a fall as a WARNING line and exit 0 (CI, on a loaded machine)
    scripts/bench_guard.py --list          the guarded table as this script reads it

A ratio falls when the median of the runs is more than --tolerance (default 0.15, 15%) below the
recorded figure. Exit status: 0 all held; 1 a ratio fell (or a bench failed or printed no figure);
2 the table or an option is unusable. Developers run it on a quiet machine before they stop; CI
runs it with --warn-only (docs/ARCHITECTURE.md, "Habits").
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE_TITLE = "## Guarded ratios"
MAX_OUTPUT = 16 << 20  # a bench's output is read up to this many bytes
ROW = re.compile(r"^\|\s*`?([a-z0-9_-]+)`?\s*\|\s*`([^`]+)`\s*\|\s*`([A-Za-z0-9_.]+)`\s*\|\s*([0-9.]+)x?\s*\|\s*([^|]*)\|\s*$")


class Unusable(Exception):
    """The table, an option or a saved file cannot be used: exit status 2."""


def read_table(path):
    """The rows of the guarded table: [{name, command, field, recorded, when}]."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read(MAX_OUTPUT).splitlines()
    except OSError as e:
        raise Unusable(f"{path}: {e.strerror}")
    try:
        start = lines.index(TABLE_TITLE)
    except ValueError:
        raise Unusable(f'{path}: no "{TABLE_TITLE}" section')
    rows = []
    for n, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("## "):
            break
        if not line.startswith("|") or set(line) <= set("|-: ") or line.startswith("| bench "):
            continue
        m = ROW.match(line)
        if not m:
            raise Unusable(f"{path}:{n}: a guarded row is | name | `grpo bench ...` | `json.field` | ratio | when |, got: {line}")
        name, command, field, recorded, when = m.groups()
        if not command.startswith("grpo bench "):
            raise Unusable(f"{path}:{n}: the command of {name} must start with `grpo bench `")
        value = float(recorded)
        if not value > 0:
            raise Unusable(f"{path}:{n}: the recorded ratio of {name} must be > 0")
        if any(r["name"] == name for r in rows):
            raise Unusable(f"{path}:{n}: {name} is guarded twice")
        rows.append({"name": name, "command": command, "field": field, "recorded": value, "when": when.strip()})
    if not rows:
        raise Unusable(f'{path}: the "{TABLE_TITLE}" section has no rows')
    return rows


def last_json_line(text, what):
    """The last line of `text` that is a JSON object (a bench prints its figures last as one)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if isinstance(j, dict):
                return j
    raise ValueError(f"{what}: no JSON object line in its output")


def field_of(j, path, what):
    cur = j
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise ValueError(f"{what}: its JSON has no {path}")
        cur = cur[part]
    if isinstance(cur, bool) or not isinstance(cur, (int, float)) or cur != cur:
        raise ValueError(f"{what}: {path} is {json.dumps(cur)}, not a number")
    return float(cur)


def run_bench(row, grpo, timeout_s):
    args = shlex.split(row["command"])
    argv = [grpo] + args[1:]
    try:
        p = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ValueError(f"{row['name']}: `{row['command']}` ran past {timeout_s} s")
    out = p.stdout[:MAX_OUTPUT].decode("utf-8", "replace")
    if p.returncode != 0:
        tail = "\n".join(out.splitlines()[-5:])
        raise ValueError(f"{row['name']}: `{row['command']}` exited {p.returncode}:\n{tail}")
    return last_json_line(out, row["name"])


def saved_runs(row, directory):
    path = os.path.join(directory, row["name"] + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_OUTPUT)
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}")
    runs = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                j = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e})")
            if not isinstance(j, dict):
                raise ValueError(f"{path}:{n}: not a JSON object")
            runs.append(j)
    if not runs:
        raise ValueError(f"{path}: no runs")
    return runs


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmarks", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--grpo", default=os.path.join(ROOT, "build", "release", "app", "grpo"))
    ap.add_argument("--bench", action="append", default=[])
    ap.add_argument("--from", dest="from_dir")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per bench run")
    ap.add_argument("--warn-only", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    try:
        if not 0 < a.tolerance < 1:
            raise Unusable("--tolerance must be in (0, 1)")
        if not 1 <= a.repeat <= 20:
            raise Unusable("--repeat must be in [1, 20]")
        rows = read_table(a.benchmarks)
        known = {r["name"] for r in rows}
        for b in a.bench:
            if b not in known:
                raise Unusable(f"no guarded bench {b}; guarded: {', '.join(sorted(known))}")
        if a.bench:
            rows = [r for r in rows if r["name"] in a.bench]
        if not a.from_dir and not a.list and not os.access(a.grpo, os.X_OK):
            raise Unusable(f"{a.grpo}: not an executable (build the release preset, or pass --grpo)")
    except Unusable as e:
        print(f"bench_guard: {e}", file=sys.stderr)
        return 2
    if a.list:
        for r in rows:
            print(f"{r['name']}: {r['command']} -> {r['field']} recorded {r['recorded']} ({r['when']})")
        return 0
    fell = 0
    for r in rows:
        try:
            runs = saved_runs(r, a.from_dir) if a.from_dir else [run_bench(r, a.grpo, a.timeout) for _ in range(a.repeat)]
            values = [field_of(j, r["field"], r["name"]) for j in runs]
        except ValueError as e:
            print(f"bench_guard: FAILED {e}")
            fell += 1
            continue
        median = statistics.median(values)
        floor = r["recorded"] * (1 - a.tolerance)
        shown = ", ".join(f"{v:.3g}" for v in values)
        # The kernel set the bench multiplied with ("blas" in forward's and grpo-step's JSON): a
        # ratio recorded under one OpenBLAS set and measured under another is read with that in mind.
        blas = sorted({j["blas"] for j in runs if isinstance(j.get("blas"), str)})
        shown += "; blas: " + " | ".join(blas) if blas else ""
        if median < floor:
            fell += 1
            tag = "WARNING" if a.warn_only else "FELL"
            print(f"bench_guard: {tag} {r['name']}: {r['field']} {median:.3g} (runs {shown}) is "
                  f"{100 * (1 - median / r['recorded']):.0f}% below the recorded {r['recorded']:.3g} "
                  f"({r['when']}); allowed {100 * a.tolerance:.0f}%: `{r['command']}`")
        else:
            print(f"bench_guard: ok {r['name']}: {r['field']} {median:.3g} (runs {shown}), recorded {r['recorded']:.3g}")
    if fell and not a.warn_only:
        print(f"bench_guard: {fell} of {len(rows)} guarded ratios fell or could not be measured", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
