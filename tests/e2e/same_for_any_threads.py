#!/usr/bin/env python3
"""Trains one model on the cpu target with 1, 2, ... threads: same bits.

  same_for_any_threads.py --program <train_steps> --steps 6 --threads 1,2,3

The program (tests/cuda/train_steps.cpp) trains from a fixed seed on fixed
inputs, evaluates and saves a checkpoint. A launch's blocks and a GEMM's
rows are split over the session's threads, but every element is computed by
the same operations in the same order whatever the split, so the printed
losses and the checkpoint's bytes must be identical for every thread count.
"""

import argparse
import os
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", default="1,2,3")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in counts:
            checkpoint = os.path.join(tmp, f"threads{threads}.safetensors")
            result = subprocess.run(
                [args.program, f"--steps={args.steps}",
                 f"--checkpoint={checkpoint}", f"--threads={threads}"],
                capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"error: {threads} threads: exit {result.returncode}"
                         f"\n{result.stdout}{result.stderr}")
            with open(checkpoint, "rb") as f:
                runs.append((threads, result.stdout, f.read()))
    threads0, output0, bytes0 = runs[0]
    print(output0, end="")
    failed = False
    for threads, output, data in runs[1:]:
        if output != output0:
            failed = True
            print(f"FAIL: {threads} threads print other losses than "
                  f"{threads0}:\n{output}")
        if data != bytes0:
            differing = sum(a != b for a, b in zip(data, bytes0))
            failed = True
            print(f"FAIL: {threads} threads' checkpoint differs from "
                  f"{threads0}'s in {differing} of {len(bytes0)} bytes"
                  + ("" if len(data) == len(bytes0) else
                     f" (sizes {len(data)} and {len(bytes0)})"))
        else:
            print(f"{threads} threads: same losses and checkpoint "
                  f"({len(data)} bytes) as {threads0}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
