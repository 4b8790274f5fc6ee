#!/usr/bin/env python3
"""Trains one model on the cpu target with 1, 2, ... threads, and from
libraries compiled with other --cpu choices: same bits.

  same_for_any_threads.py --program <train_steps> [--program <other>...]
      --steps 6 --threads 1,2,3 [--needs-cpu avx2,fma]

The programs (tests/cuda/train_steps.cpp) train from a fixed seed on fixed
inputs, evaluate and save a checkpoint. A launch's blocks and a GEMM's
rows are split over the session's threads, but every element is computed by
the same operations in the same order whatever the split, so the printed
losses and the checkpoint's bytes must be identical for every thread count.
The same holds for the same model compiled with another --cpu (its host
code vectorised for AVX2 or AVX-512, never contracted into FMAs). A test
whose programs need CPU features this machine lacks (--needs-cpu, flags of
/proc/cpuinfo) is skipped (exit 77).
"""

import argparse
import os
import subprocess
import sys
import tempfile


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", required=True, action="append")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", default="1,2,3")
    parser.add_argument("--needs-cpu", default="")
    args = parser.parse_args()
    missing = set(filter(None, args.needs_cpu.split(","))) - cpu_flags()
    if missing:
        print(f"skipped: this CPU lacks {', '.join(sorted(missing))}")
        return 77
    counts = [int(t) for t in args.threads.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, program in enumerate(args.program):
            for threads in counts:
                label = (f"{threads} threads" if len(args.program) == 1 else
                         f"{os.path.basename(program)} on {threads} threads")
                checkpoint = os.path.join(
                    tmp, f"program{index}_threads{threads}.safetensors")
                result = subprocess.run(
                    [program, f"--steps={args.steps}",
                     f"--checkpoint={checkpoint}", f"--threads={threads}"],
                    capture_output=True, text=True)
                if result.returncode != 0:
                    sys.exit(f"error: {label}: exit {result.returncode}"
                             f"\n{result.stdout}{result.stderr}")
                with open(checkpoint, "rb") as f:
                    runs.append((label, result.stdout, f.read()))
    label0, output0, bytes0 = runs[0]
    print(output0, end="")
    failed = False
    for label, output, data in runs[1:]:
        if output != output0:
            failed = True
            print(f"FAIL: {label} prints other losses than {label0}:\n"
                  f"{output}")
        if data != bytes0:
            differing = sum(a != b for a, b in zip(data, bytes0))
            failed = True
            print(f"FAIL: {label}: the checkpoint differs from {label0}'s in "
                  f"{differing} of {len(bytes0)} bytes"
                  + ("" if len(data) == len(bytes0) else
                     f" (sizes {len(data)} and {len(bytes0)})"))
        else:
            print(f"{label}: same losses and checkpoint ({len(data)} bytes) "
                  f"as {label0}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
