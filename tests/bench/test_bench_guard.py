#!/usr/bin/env python3
"""scripts/bench_guard.py on made-up tables and saved bench outputs: a ratio that falls more than
the tolerance fails, one within it holds, --warn-only reports without failing, the median of the
runs is what counts, and a broken table, bench output or option is refused with a clear message.
The repository's own BENCHMARKS.md table must parse. Exits non-zero on the first failed check."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUARD = os.path.join(ROOT, "scripts", "bench_guard.py")
TABLE = """# Benchmarks

## Guarded ratios

| bench | command | field | recorded | when |
|---|---|---|---|---|
| step | `grpo bench grpo-step --model m` | `speedup` | 2.00x | dev-2c, 2026-12-03 |
| cluster | `grpo bench cluster --parts straggler` | `async.ratio` | 0.80 | dev-2c, 2026-12-03 |

## Next section
| not | a | guarded | row |
"""


def guard(*args, table=TABLE, runs=None):
    with tempfile.TemporaryDirectory() as d:
        bench_md = os.path.join(d, "BENCHMARKS.md")
        with open(bench_md, "w") as f:
            f.write(table)
        for name, lines in (runs or {}).items():
            with open(os.path.join(d, name + ".json"), "w") as f:
                f.write("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
        p = subprocess.run([sys.executable, GUARD, "--benchmarks", bench_md, "--from", d, *args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        return p.returncode, p.stdout


failures = 0


def check(cond, what, out=""):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL {what}\n{out}")
    else:
        print(f"ok   {what}")


held = {"step": [{"speedup": 1.9}, {"speedup": 2.1}, {"speedup": 1.95}], "cluster": [{"async": {"ratio": 0.79}}]}
rc, out = guard(runs=held)
check(rc == 0 and out.count("bench_guard: ok") == 2, "ratios within 15% hold", out)

rc, out = guard(runs={**held, "step": [{"speedup": 1.5}, {"speedup": 1.6}, {"speedup": 2.5}]})
check(rc == 1 and "FELL step" in out and "20% below the recorded 2" in out and "grpo bench grpo-step" in out,
      "a median 20% below the recorded figure fails, naming the bench, the fall and the command", out)

rc, out = guard("--warn-only", runs={**held, "step": [{"speedup": 1.0}]})
check(rc == 0 and "WARNING step" in out, "--warn-only reports a fall as a WARNING line and exits 0", out)

rc, out = guard("--warn-only", runs={**held, "step": [{"speedup": 1.0, "blas": "OpenBLAS 0.3.21, Haswell kernels (x)"},
                                                    {"speedup": 1.1, "blas": "OpenBLAS 0.3.21, Cooperlake kernels (y)"}]})
check(rc == 0 and "blas: OpenBLAS 0.3.21, Cooperlake kernels (y) | OpenBLAS 0.3.21, Haswell kernels (x)" in out,
      "the kernel sets the runs multiplied with are shown beside the ratio", out)

rc, out = guard(runs={**held, "step": [{"speedup": 1.0}, {"speedup": 2.0}, {"speedup": 2.0}]})
check(rc == 0, "the median of the runs counts, not the worst run", out)

rc, out = guard(runs={**held, "cluster": [{"sync": {"ratio": 0.9}}]})
check(rc == 1 and "FAILED cluster: its JSON has no async.ratio" in out, "a missing field fails, named", out)

rc, out = guard(runs={**held, "cluster": [{"async": {"ratio": "fast"}}]})
check(rc == 1 and "not a number" in out, "a field that is not a number fails", out)

rc, out = guard(runs={**held, "cluster": ["{not json"]})
check(rc == 1 and "cluster.json:1: not JSON" in out, "a saved line that is not JSON fails, with its file and line", out)

rc, out = guard(runs={"step": held["step"]})
check(rc == 1 and "cluster.json" in out, "a bench with no saved runs fails", out)

rc, out = guard("--bench", "step", runs={"step": held["step"]})
check(rc == 0 and "cluster" not in out, "--bench picks one", out)

rc, out = guard("--bench", "nope", runs=held)
check(rc == 2 and "no guarded bench nope" in out, "an unknown --bench is a usage error naming the guarded ones", out)

rc, out = guard(table=TABLE.replace("| 2.00x |", "| -1 |"), runs=held)
check(rc == 2 and "BENCHMARKS.md:" in out, "a malformed row is refused with its file and line", out)

rc, out = guard(table=TABLE.replace("| 0.80 |", "| 0 |"), runs=held)
check(rc == 2 and "must be > 0" in out, "a recorded ratio of 0 is refused", out)

rc, out = guard(table=TABLE.replace("## Guarded ratios", "## Other"), runs=held)
check(rc == 2 and 'no "## Guarded ratios" section' in out, "a table without the section is refused", out)

rc, out = guard("--tolerance", "1.5", runs=held)
check(rc == 2 and "--tolerance" in out, "a tolerance outside (0, 1) is refused", out)

p = subprocess.run([sys.executable, GUARD, "--list"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
check(p.returncode == 0 and p.stdout.count("grpo bench ") >= 4, "the repository's BENCHMARKS.md table parses (4 or more guarded ratios)", p.stdout)

sys.exit(1 if failures else 0)
