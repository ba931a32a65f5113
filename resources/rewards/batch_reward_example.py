#!/usr/bin/env python3
"""An external reward program for GRPO Studio's batch protocol (standard library only).

Use it in a run config:

    reward_funcs:
      - name: external
        command: "exec python3 batch_reward_example.py"
        protocol: batch
        alias: boxed_answer

Each input line on stdin is one batch, a whole group of completions:
    {"batch": [{"prompt": "...", "completion": "...", "answer": "42" | null, <other dataset columns>}, ...]}
Print exactly one line per batch on stdout, one value per sample, in order:
    {"rewards": [1.0, 0.0, null, ...]}
null means "cannot score this sample" (it gets advantage 0). Write logs to stderr, never stdout.

This example gives 1.0 when the last \\boxed{...} of the completion equals the answer after
GSM8K's "####" (compared as numbers when both are numbers), 0.0 otherwise, and null when the
sample has no answer. It scores the whole group at once, so a group-relative reward (a rank, a
diversity bonus) fits here too.
"""
import json
import sys


def last_boxed(text):
    """The content of the last \\boxed{...} with balanced braces, or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    out = []
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return "".join(out).strip()
        out.append(c)
        i += 1
    return None


def as_number(text):
    try:
        return float(text.replace(",", "").replace("$", "").strip())
    except ValueError:
        return None


def score(sample):
    answer = sample.get("answer")
    if answer is None:
        return None
    gold = str(answer).split("####")[-1].strip()
    got = last_boxed(sample.get("completion", ""))
    if got is None:
        return 0.0
    a, b = as_number(got), as_number(gold)
    if a is not None and b is not None:
        return 1.0 if abs(a - b) <= 1e-9 * max(1.0, abs(b)) else 0.0
    return 1.0 if got == gold else 0.0


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            batch = json.loads(line)["batch"]
            rewards = [score(s) for s in batch]
        except Exception as e:  # a bad line: say so on stderr, answer with nulls of unknown count
            print(f"batch_reward_example: cannot score a line: {e}", file=sys.stderr)
            rewards = []
        sys.stdout.write(json.dumps({"rewards": rewards}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
