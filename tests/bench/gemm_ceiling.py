#!/usr/bin/env python3
"""The MFU ceiling of a LoRA layer's matrix products at a given number of rows: every product one
decoder layer's LoRA forward+backward makes (frozen base: input gradients only; LoRA: both factors),
each timed alone with torch.mm on this machine, against the square GEMM the in-run MFU divides by
(model/flops.cpp: 1024 on a CPU). With every other operator free, perf/mfu_fwd_bwd could not pass it.

    gemm_ceiling.py [--rows M] [--hidden 128] [--q 128] [--kv 64] [--inter 384] [--r 16] [--threads 1]

Prints one JSON line: peak GFLOP/s, the layer's FLOPs, its summed product time and the ceiling.
"""
import argparse
import json
import time

import torch


def timed(m, k, n, reps=20):
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--q", type=int, default=128)
    p.add_argument("--kv", type=int, default=64)
    p.add_argument("--inter", type=int, default=384)
    p.add_argument("--r", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    n = 1024
    peak = 2.0 * n ** 3 / min(timed(n, n, n, 3) for _ in range(3))
    M, h, r = a.rows, a.hidden, a.r
    projections = [(h, a.q), (h, a.kv), (h, a.kv), (a.q, h), (h, a.inter), (h, a.inter), (a.inter, h)]
    shapes = []  # (m, k, n) of every product
    for i, o in projections:
        shapes += [(M, i, o), (M, o, i)]                        # base: forward, input gradient
        shapes += [(M, i, r), (M, r, o)]                        # LoRA forward: x A^T, h B^T
        shapes += [(M, o, r), (r, M, i), (o, M, r), (M, r, i)]  # LoRA backward: dh, dA, dB, dx
    flops = sum(2.0 * m * k * n for m, k, n in shapes)
    seconds = sum(timed(m, k, n) for m, k, n in shapes)
    print(json.dumps({"rows": M, "threads": a.threads, "peak_gflops": peak / 1e9, "layer_gflop": flops / 1e9,
                      "products_s": seconds, "ceiling": flops / seconds / peak}))


if __name__ == "__main__":
    main()
