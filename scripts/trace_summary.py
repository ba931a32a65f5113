#!/usr/bin/env python3
"""Self and inclusive time per operator in a LibTorch profiler trace (chrome://tracing JSON),
e.g. the one `grpo bench grpo-step --trace FILE` writes for one step of our trainer.

    scripts/trace_summary.py FILE [TOP]

Self time is an event's duration minus that of the events nested in it on the same thread.
"""
import collections
import json
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 40
    with open(sys.argv[1], encoding="utf-8") as f:
        events = [e for e in json.load(f) if e.get("ph") == "X"]
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    self_time, incl, count = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0.0
    for es in by_thread.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [end, name, self]
        for e in es:
            while stack and stack[-1][0] <= e["ts"] + 1e-6:
                _, name, own = stack.pop()
                self_time[name] += own
            if stack:
                stack[-1][2] -= e["dur"]
            else:
                total += e["dur"]
            stack.append([e["ts"] + e["dur"], e["name"], e["dur"]])
            incl[e["name"]] += e["dur"]
            count[e["name"]] += 1
        for _, name, own in stack:
            self_time[name] += own
    print(f"top-level total {total / 1e3:.1f} ms")
    for name, t in self_time.most_common(top):
        print(f"{name[:60]:60s} self {t / 1e3:9.1f} ms  incl {incl[name] / 1e3:9.1f} ms  n {count[name]:7d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
