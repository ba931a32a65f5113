#!/usr/bin/env python3
"""Does pushing to the Hub while training slow the steps down? (docs/hub.md, "Pushing while training")

Runs `grpo train --demo` twice per round with the same seed and length, once plain and once with
push_to_hub (hub_strategy every_save by default), against the loopback Hub stand-in
(tests/hub/hub_standin_server, which checks each request as the Hub's API would), and compares the
step times from each run's metrics.jsonl: the median interval between consecutive steps' metrics
lines (it includes the checkpoint save and the hand-over to the pusher, which perf/step_s does not),
the median perf/step_s, and the wall time from the first step to the last. Rounds alternate the
order (plain first, then pushing first) so drift of a shared machine falls on both sides.

  scripts/bench_hub_push.py [--build build/release] [--steps 100] [--save-steps 10] [--rounds 2]

With --merged SIZE it instead pushes a merged model of that size: `grpo bench make-model` writes
a random SIZE model (25m: about 25M parameters) with the demo's tokenizer, `grpo train` trains an
adapter on it for 2 steps, `grpo export --merged` folds it in, `grpo push` uploads the folder (its
large file in multipart parts), and `grpo download` fetches the repo into a fresh cache, whose
files are compared with the pushed folder byte for byte.

Prints one table and a JSON line; exits non-zero when a run or a push fails or the stand-in saw a
request the Hub would refuse. A measurement, never a test: nothing here asserts a time.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TOKEN = "hf_bench_push_token_0123456789"


def run_train(grpo, out, steps, save_steps, env, push, strategy):
    cmd = [grpo, "train", "--demo", "--steps", str(steps), "--output", out, "--set", f"save_steps={save_steps}",
           "--set", "eval_steps=0"]
    if push:
        cmd += ["--set", "push_to_hub=true", "--set", "hub_model_id=bench/demo-push", "--set", f"hub_strategy={strategy}"]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"bench_hub_push: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}")
    lines = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if l.strip()]
    events = [json.loads(l) for l in open(os.path.join(out, "events.jsonl")) if l.strip()]
    times = [l["time"] for l in lines]
    gaps = [b - a for a, b in zip(times, times[1:])]
    kinds = {}
    for e in events:
        kinds[e.get("event")] = kinds.get(e.get("event"), 0) + 1
    if push and (kinds.get("hub_push_failed", 0) or not kinds.get("hub_pushed", 0)):
        sys.exit(f"bench_hub_push: the pushes of {out} failed: {kinds}")
    return {
        "steps": len(lines),
        "median_gap_s": statistics.median(gaps),
        "median_step_s": statistics.median(l["perf/step_s"] for l in lines if "perf/step_s" in l),
        "wall_s": times[-1] - times[0],
        "pushed": kinds.get("hub_pushed", 0),
        "skipped": kinds.get("hub_push_skipped", 0),
    }


def sh(cmd, env, what):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"bench_hub_push: {what} failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-4000:]}")
    return r


def push_merged(grpo, size, tmp, env):
    model = os.path.join(tmp, f"model-{size}")
    sh([grpo, "bench", "make-model", "--size", size, "--output", model], env, "make-model")
    run = os.path.join(tmp, "run-merged")
    sh([grpo, "train", "--demo", "--steps", "2", "--output", run, "--set", f"model_name_or_path={model}",
        "--set", "eval_steps=0", "--set", "save_steps=0"], env, "training on the generated model")
    exported = os.path.join(tmp, "export-merged")
    sh([grpo, "export", "--run", run, "--merged", "--output", exported], env, "the merged export")
    repo = f"bench/merged-{size}"
    t0 = time.monotonic()
    pushed = sh([grpo, "push", exported, repo], env, "grpo push")
    push_s = time.monotonic() - t0
    summary = json.loads(pushed.stdout.strip().splitlines()[-1])
    parts = re.search(r"(\d+) parts", pushed.stderr)
    cache = os.path.join(tmp, "fresh-cache")
    t0 = time.monotonic()
    got = sh([grpo, "download", repo, "--cache-dir", cache], env, "grpo download")
    download_s = time.monotonic() - t0
    snapshot = got.stdout.strip().splitlines()[-1]
    names = sorted(os.path.relpath(os.path.join(d, f), exported) for d, _, fs in os.walk(exported) for f in fs)
    total, differ = 0, []
    for n in names:
        a, b = os.path.join(exported, n), os.path.join(snapshot, n)
        with open(a, "rb") as fa:
            da = fa.read()
        total += len(da)
        if not os.path.exists(b) or open(b, "rb").read() != da:
            differ.append(n)
    out = {"size": size, "files": len(names), "bytes": total, "lfs_bytes_sent": summary["lfs_bytes_sent"],
           "parts": int(parts.group(1)) if parts else 0, "push_s": round(push_s, 2), "download_s": round(download_s, 2),
           "identical": not differ, "differ": differ}
    print(f"merged {size} model: {len(names)} files, {total:,} bytes; pushed {summary['lfs_bytes_sent']:,} LFS bytes "
          f"in {out['parts']} parts ({push_s:.1f} s); fresh download ({download_s:.1f} s) "
          + ("identical byte for byte" if not differ else "DIFFERS: " + ", ".join(differ)))
    print(json.dumps(out))
    if differ:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--save-steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--strategy", default="every_save")
    ap.add_argument("--merged", metavar="SIZE", help="push a merged model of this size instead (tiny, 25m, 100m)")
    a = ap.parse_args()
    grpo = os.path.join(a.build, "app", "grpo")
    server_bin = os.path.join(a.build, "tests", "hub", "hub_standin_server")
    for p in (grpo, server_bin):
        if not os.access(p, os.X_OK):
            sys.exit(f"bench_hub_push: {p} is missing: build it (cmake --build {a.build} --target grpo hub_standin_server)")
    server = subprocess.Popen([server_bin, TOKEN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        server.kill()
        sys.exit(f"bench_hub_push: the stand-in did not start (said {url!r})")
    plain, pushing = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HF_ENDPOINT=url, HF_TOKEN=TOKEN, HF_HOME=os.path.join(tmp, "hf-home"))
        try:
            if a.merged:
                push_merged(grpo, a.merged, tmp, env)
            for rnd in range(0 if a.merged else a.rounds):
                order = [False, True] if rnd % 2 == 0 else [True, False]
                for push in order:
                    out = os.path.join(tmp, f"run-{rnd}-{'push' if push else 'plain'}")
                    (pushing if push else plain).append(run_train(grpo, out, a.steps, a.save_steps, env, push, a.strategy))
        finally:
            server.stdin.close()  # the stand-in exits when its stdin closes
            server_rc = server.wait(timeout=60)
    if server_rc != 0:
        sys.exit("bench_hub_push: the stand-in saw requests the Hub would refuse (its stderr above)")
    if a.merged:
        return

    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    rows = [("median interval between steps (s)", "median_gap_s"), ("median perf/step_s (s)", "median_step_s"),
            ("wall time, first to last step (s)", "wall_s")]
    print(f"{a.rounds} rounds of grpo train --demo --steps {a.steps}, save_steps {a.save_steps}, "
          f"hub_strategy {a.strategy} (medians over rounds)")
    print(f"| | without push | with push | ratio |\n|---|---|---|---|")
    out = {"steps": a.steps, "save_steps": a.save_steps, "rounds": a.rounds, "strategy": a.strategy}
    for label, key in rows:
        w, p = med(plain, key), med(pushing, key)
        print(f"| {label} | {w:.3f} | {p:.3f} | {p / w:.3f} |")
        out[key] = {"without": w, "with": p, "ratio": p / w}
    out["pushed_per_run"] = [r["pushed"] for r in pushing]
    out["skipped_per_run"] = [r["skipped"] for r in pushing]
    print(f"pushes per pushing run: {out['pushed_per_run']} (skipped: {out['skipped_per_run']})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
