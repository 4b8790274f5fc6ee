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

With --counters, ncu also reads what the block emulator counts (global
requests and sectors, shared requests and wavefronts, L2 read sectors,
warp and thread instructions, local-memory sectors) and the table shows
them per family, the kernels' names restricted to mpc's own (cuBLASLt's
are left out: the emulator does not count them). --compare=FILE.json,
from `tools/bench/emulated_counters.py --json --save=FILE.json`, puts the
emulator's figures beside ncu's, family by family.

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
import json
import re
import subprocess
import sys

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum",
           "dram__bytes_write.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active"]
TIME_UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0,
              "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
# What the emulator counts, as ncu names it (issue 31). Names a GPU's ncu
# does not know are dropped before profiling (--query-metrics).
COUNTER_METRICS = [
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "smsp__inst_executed.sum",
    "smsp__thread_inst_executed.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__cycles_elapsed.max",
]
# mpc's kernels are named <model>_k<number>_<op>.
MPC_KERNELS = "regex:_k[0-9]+_"
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


# The emulator's counters beside ncu's: (row, ncu metrics summed, the
# emulator's fields of a kernel summed).
COMPARED = [
    ("global load requests", ["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"],
     [("global_load", "requests")]),
    ("global load sectors", ["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
     [("global_load", "sectors")]),
    ("global store requests",
     ["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"],
     [("global_store", "requests")]),
    ("global store sectors", ["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"],
     [("global_store", "sectors")]),
    ("global atomic requests",
     ["l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
      "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum"],
     [("global_atomic", "requests")]),
    ("shared requests", ["smsp__sass_inst_executed_op_shared_ld.sum",
                         "smsp__sass_inst_executed_op_shared_st.sum"],
     [("shared_load", "requests"), ("shared_store", "requests")]),
    ("shared wavefronts",
     ["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
      "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"],
     [("shared_load", "wavefronts"), ("shared_store", "wavefronts")]),
    ("L2 read sectors | distinct load sectors",
     ["lts__t_sectors_srcunit_tex_op_read.sum"],
     [("distinct_load_sectors", None)]),
]


def emulated_families(data):
    """The emulator's counters (emulated_counters.py --json) summed by
    family, in COMPARED's rows."""
    families = collections.defaultdict(collections.Counter)
    for kernel in data["kernels"]:
        entry = families[family(kernel["kernel"])]
        entry["launches"] += kernel["launches"]
        for row, _, fields in COMPARED:
            for group, field in fields:
                entry[row] += (kernel[group] if field is None
                               else kernel[group][field])
    return families


def compare(kernels, emulated, top):
    """ncu's counters of the last step beside the emulator's, family by
    family (the largest in time first)."""
    measured = collections.defaultdict(collections.Counter)
    for i in last_step(kernels):
        entry = measured[family(kernels[i]["name"])]
        entry["launches"] += 1
        for metric, value in kernels[i].items():
            if metric != "name":
                entry[metric] += value
    print(f"{'family':<28} {'counter':<40} {'ncu':>12} {'emulator':>12} "
          f"{'emu/ncu':>8}")
    ranked = sorted(measured.items(), key=lambda kv: -kv[1][METRICS[0]])
    for name, ncu in ranked[:top]:
        emu = emulated.get(name)
        if emu is None:
            print(f"{name:<28} (not counted by the emulator)")
            continue
        rows = [("launches", ncu["launches"], emu["launches"])]
        rows += [(row, sum(ncu[m] for m in metrics), emu[row])
                 for row, metrics, _ in COMPARED]
        for row, a, b in rows:
            if a == 0 and b == 0:
                continue
            share = f"{b / a:8.2f}" if a else f"{'-':>8}"
            print(f"{name:<28} {row:<40} {a:>12.0f} {b:>12.0f} {share}")
        instructions = ncu["smsp__inst_executed.sum"]
        if instructions:
            lanes = ncu["smsp__thread_inst_executed.sum"] / instructions
            local = (ncu["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"]
                     + ncu["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"])
            print(f"{name:<28} {'(ncu) warp instructions, lanes active':<40} "
                  f"{instructions:>12.0f} {lanes:>12.1f}")
            if local:
                print(f"{name:<28} {'(ncu) local-memory sectors (spills)':<40} "
                      f"{local:>12.0f}")


def known_metrics(wanted):
    """The metrics of `wanted` that this GPU's ncu knows (all of them if
    ncu cannot say): an unknown name would fail the whole profile."""
    query = subprocess.run(["ncu", "--query-metrics"], capture_output=True,
                           text=True)
    if query.returncode != 0:
        return wanted
    known = set(re.findall(r"^(\w+)", query.stdout, re.M))
    kept = [m for m in wanted if m.rsplit(".", 1)[0] in known]
    for m in wanted:
        if m not in kept:
            print(f"gpu_profile.py: this ncu has no {m}", file=sys.stderr)
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--program", help="a --build-only bench program")
    source.add_argument("--csv", help="a profile saved with --save")
    parser.add_argument("--save", help="where to keep ncu's CSV")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--counters", action="store_true",
                        help="also read the emulator's counters (mpc's "
                        "kernels only)")
    parser.add_argument("--compare", metavar="FILE.json",
                        help="the emulator's counters of the same model "
                        "(emulated_counters.py --json --save) beside ncu's")
    parser.add_argument("--launch-skip", type=int)
    parser.add_argument("--launch-count", type=int)
    args = parser.parse_args()
    if args.csv:
        with open(args.csv) as f:
            text = f.read()
    else:
        metrics = METRICS
        if args.counters:
            metrics = METRICS + known_metrics(COUNTER_METRICS)
        command = ["ncu", "--csv", "--print-units", "base", "--metrics",
                   ",".join(metrics)]
        if args.counters:
            command += ["--kernel-name", MPC_KERNELS]
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
    kernels = read_kernels(text)
    if args.compare:
        with open(args.compare) as f:
            compare(kernels, emulated_families(json.load(f)), args.top)
    else:
        summarise(kernels, args.top)


if __name__ == "__main__":
    main()
