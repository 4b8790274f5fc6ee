#!/usr/bin/python3
"""Where one training step's GPU time goes, kernel family by kernel family,
from Nsight Compute: a program that tools/bench/gpu_step.py or
gpu_resnet50.py built (--build-only) is run under `ncu` for one warm-up
step and one measured step, and the measured step's kernels are summed by
family (mpc's kernels by their name less the model and the kernel number,
cuBLASLt's by theirs): launches, time, DRAM bytes, the bandwidth that is,
and the warps resident on average (achieved occupancy).

On the GPU machine:

  python3 tools/bench/gpu_profile.py --program DIR/bench_gpt2_small/bench
      [--save=FILE.csv] [--top=25] [--launch-skip=N --launch-count=M]

Anywhere, from a saved profile:

  python3 tools/bench/gpu_profile.py --csv FILE.csv

ncu locks the clocks at their base (its default), so its times are longer
than a timed step's: compare families within one profile. A step is found
as the period of the launch sequence (the last kernel's name recurs once a
step). ResNet-50's step is too long to profile whole in a few minutes: pass
--launch-skip/--launch-count to take part of it.
"""

import argparse
import collections
import csv
import io
import re
import subprocess
import sys

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum",
           "dram__bytes_write.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active"]
TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0,
              "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTE_UNITS = {"B": 1, "byte": 1, "KB": 1e3, "Kbyte": 1e3, "MB": 1e6,
              "Mbyte": 1e6, "GB": 1e9, "Gbyte": 1e9}


def read_kernels(text):
    """{launch id: {"name": ..., metric: value in us or bytes or %}}."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    kernels = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        kernel = kernels.setdefault(int(row["ID"]),
                                    {"name": row["Kernel Name"]})
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        metric, unit = row["Metric Name"], row["Metric Unit"]
        if metric == "gpu__time_duration.sum":
            value *= TIME_UNITS[unit]
        elif "bytes" in metric:
            value *= BYTE_UNITS[unit]
        kernel[metric] = value
    return kernels


def last_step(kernels):
    """The launch ids of the last step: from the last kernel's previous
    launch (exclusive) to the end."""
    ids = sorted(kernels)
    names = [kernels[i]["name"].split("(")[0] for i in ids]
    recurs = [i for i, name in enumerate(names) if name == names[-1]]
    if len(recurs) < 2:
        return ids
    return ids[recurs[-2] + 1:]


def family(name):
    name = name.split("(")[0]
    generated = re.match(r"^\w+?_k\d+_(\w+)$", name)
    if generated:
        return re.sub(r"_\d+$", "", generated.group(1))
    return "lib: " + name.replace("void ", "")[:56]


def summarise(kernels, top):
    step = last_step(kernels)
    total = sum(kernels[i].get(METRICS[0], 0.0) for i in step)
    print(f"one step: {len(step)} kernels, {total / 1e3:.2f} ms of kernel "
          "time (ncu's clocks)")
    families = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for i in step:
        kernel = kernels[i]
        entry = families[family(kernel["name"])]
        entry[0] += 1
        entry[1] += kernel.get(METRICS[0], 0.0)
        entry[2] += kernel.get(METRICS[1], 0.0) + kernel.get(METRICS[2], 0.0)
        entry[3] += kernel.get(METRICS[3], 0.0)
    print(f"{'family':<58} {'launches':>8} {'ms':>8} {'share':>6} "
          f"{'GB':>7} {'GB/s':>6} {'occ %':>6}")
    ranked = sorted(families.items(), key=lambda item: -item[1][1])
    for name, (launches, us, bytes_, occupancy) in ranked[:top]:
        print(f"{name:<58} {launches:>8} {us / 1e3:>8.3f} "
              f"{100 * us / total:>5.1f}% {bytes_ / 1e9:>7.2f} "
              f"{bytes_ / (us * 1e3) if us else 0:>6.0f} "
              f"{occupancy / launches:>6.0f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--program", help="a --build-only bench program")
    source.add_argument("--csv", help="a profile saved with --save")
    parser.add_argument("--save", help="where to keep ncu's CSV")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--launch-skip", type=int)
    parser.add_argument("--launch-count", type=int)
    args = parser.parse_args()
    if args.csv:
        with open(args.csv) as f:
            text = f.read()
    else:
        command = ["ncu", "--csv", "--metrics", ",".join(METRICS)]
        if args.launch_skip is not None:
            command += ["--launch-skip", str(args.launch_skip)]
        if args.launch_count is not None:
            command += ["--launch-count", str(args.launch_count)]
        command += [args.program, "--bench=1", "--warmup=1"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"error: {' '.join(command)}:\n{result.stderr[-2000:]}")
        text = result.stdout
        if args.save:
            with open(args.save, "w") as f:
                f.write(text)
    summarise(read_kernels(text), args.top)


if __name__ == "__main__":
    main()
