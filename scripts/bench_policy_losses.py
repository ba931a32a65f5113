#!/usr/bin/env python3
# The demo trained once per policy loss and once per off-policy correction, same seed, same preset
# otherwise: greedy eval accuracy at two steps, wall time, and what the off-policy metrics saw.
# It is the data behind BENCHMARKS.md's "TRL's policy losses on the demo" and "Sampler log-probs
# or a proximal policy" tables, and behind the default of vllm_importance_sampling_correction.
#
#   scripts/bench_policy_losses.py [--grpo build/release/app/grpo] [--set losses|offpolicy|iterations|all]
#       [--steps 300] [--at 100,300] [--out results.jsonl] [--only NAME ...]
#   --set iterations: num_iterations 1 and 2 (and 2 with the proximal correction).
#
# Each variant is `grpo train --demo --steps N --set KEY=VALUE ...` into a fresh folder; one JSON
# line per finished variant is appended to --out (so a long sweep can be read while it runs), and a
# Markdown table is printed at the end. Runs are sequential: on a shared machine the accuracies are
# comparable (same seed, same data) but the wall times carry the machine's load.
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# name -> --set overrides over the demo preset (resources/presets/demo.yaml: dapo, token level).
LOSSES = [
    ("dapo", []),
    ("grpo", ["loss_type=grpo"]),
    ("bnpo", ["loss_type=bnpo"]),
    ("dr_grpo", ["loss_type=dr_grpo"]),
    ("cispo", ["loss_type=cispo", "epsilon_high=5"]),  # TRL's suggested cap for cispo
    ("sapo", ["loss_type=sapo"]),
    ("luspo", ["loss_type=luspo", "importance_sampling_level=sequence"]),
    ("vespo", ["loss_type=vespo"]),
    ("gspo", ["importance_sampling_level=sequence"]),  # dapo at the sequence level
]
# The async demo with max_staleness 4: sampler log-probs against the proximal recompute per mode.
OFFPOLICY = [("sampler", [])] + [
    ("proximal " + m, ["vllm_importance_sampling_correction=true", "vllm_importance_sampling_mode=" + m])
    for m in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
]
# num_iterations (TRL's mu): the same optimizer steps from 1/mu as many batches.
ITERATIONS = [("mu 1", []), ("mu 2", ["num_iterations=2"]), ("mu 2, proximal token_truncate",
              ["num_iterations=2", "vllm_importance_sampling_correction=true",
               "vllm_importance_sampling_mode=token_truncate"])]


def read_metrics(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass  # a torn last line of a killed run
    return rows


def mean_of(rows, key):
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


def run_variant(grpo, name, sets, steps, at, extra):
    out = tempfile.mkdtemp(prefix="grpo-policy-")
    cmd = [grpo, "train", "--demo", "--steps", str(steps), "--output", out]
    for s in extra + sets:
        cmd += ["--set", s]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=6 * 3600)
    wall = time.monotonic() - t0
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: grpo train exited {proc.returncode}:\n{proc.stdout[-3000:]}")
        rows = read_metrics(os.path.join(out, "metrics.jsonl"))
        acc = {r["step"]: r["eval/accuracy"] for r in rows if "eval/accuracy" in r}
        result = {
            "name": name, "set": sets, "steps": steps, "wall_s": round(wall, 1),
            "eval": {str(s): acc.get(s) for s in at},
            "best_eval": max(acc.values()) if acc else None,
            "staleness_mean": mean_of(rows, "sample/staleness_mean"),
            "ratio_max_mean": mean_of(rows, "ratio_max"),
            "is_ratio_mean": mean_of(rows, "sampling/importance_sampling_ratio/mean"),
            "is_frac_masked": mean_of(rows, "sampling/importance_sampling_ratio/frac_masked"),
            "is_frac_truncated": mean_of(rows, "sampling/importance_sampling_ratio/frac_truncated"),
            "logp_gap_mean": mean_of(rows, "sampling/sampling_logp_difference/mean"),
            "batches": sum(1 for r in rows if r.get("batch/reuse_pass", 0) == 0),
            "step_s_median": sorted(r["perf/step_s"] for r in rows if "perf/step_s" in r)[len(rows) // 2] if rows else None,
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return result


def fmt(v, digits=3):
    return "—" if v is None else (f"{v:.{digits}f}" if isinstance(v, float) else str(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--grpo", default="build/release/app/grpo")
    ap.add_argument("--set", dest="which", choices=("losses", "offpolicy", "iterations", "all"), default="all")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--at", default="100,300", help="steps whose eval accuracy is reported")
    ap.add_argument("--out", default="")
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    at = [int(x) for x in args.at.split(",")]
    plans = []
    if args.which in ("losses", "all"):
        plans += [("losses", n, s, []) for n, s in LOSSES]
    if args.which in ("offpolicy", "all"):
        plans += [("offpolicy", n, s, ["max_staleness=4"]) for n, s in OFFPOLICY]
    if args.which in ("iterations", "all"):
        plans += [("iterations", n, s, []) for n, s in ITERATIONS]
    if args.only:
        plans = [p for p in plans if p[1] in args.only]
    results = []
    for table, name, sets, extra in plans:
        print(f"[{table}] {name}: grpo train --demo --steps {args.steps} " + " ".join("--set " + s for s in extra + sets),
              file=sys.stderr, flush=True)
        r = run_variant(args.grpo, name, sets, args.steps, at, extra)
        r["table"] = table
        results.append(r)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(r) + "\n")
        print(json.dumps(r), file=sys.stderr, flush=True)
    head = "| variant | " + " | ".join(f"eval @ {s}" for s in at) + " | wall (s) | median step (s) | IS weight mean | masked | truncated |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in results:
        print(f"| {r['name']} | " + " | ".join(fmt(r['eval'][str(s)]) for s in at) +
              f" | {fmt(r['wall_s'], 0)} | {fmt(r['step_s_median'])} | {fmt(r['is_ratio_mean'])} | {fmt(r['is_frac_masked'])} | {fmt(r['is_frac_truncated'])} |")
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
