#!/usr/bin/env python3
"""Runs a reference training app and a candidate, compares a final loss.

  compare_losses.py --metric "corpus loss" --tolerance 0.15 [--relative]
      [--worse-by X] --reference <app> [args...] --candidate <app> [args...]
  compare_losses.py --save FILE <app> [args...]

Both apps print a line containing "<metric> <number>"; the test fails when
the candidate's number exceeds the reference's by more than --tolerance
(absolute; with --relative, a fraction of the reference's), or when either
app fails. With --worse-by X the test instead fails unless the candidate's
number exceeds the reference's by at least X (absolute, or relative with
--relative): a run that must be measurably worse, so that the comparison
can fail. Used to check that mixed-precision
builds of an example train as well as its f32 build. With --save the app
runs alone and its output goes to FILE, which `--reference @FILE` then
reads instead of running the reference again (one f32 run for every
mixed-precision build).
"""

import argparse
import re
import subprocess
import sys


def metric_in(output, metric, what):
    match = re.findall(re.escape(metric) + r" ([0-9.eE+-]+|nan|inf)", output)
    if not match:
        sys.exit(f"error: no '{metric} <number>' in the output of "
                 f"{what}:\n{output}")
    return float(match[-1])


def run(command, metric):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}:\n"
                 f"{result.stdout}{result.stderr}")
    return metric_in(result.stdout, metric, " ".join(command))


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--save"] and len(argv) >= 3:
        result = subprocess.run(argv[2:], capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"error: {' '.join(argv[2:])} exited "
                     f"{result.returncode}:\n{result.stdout}{result.stderr}")
        with open(argv[1], "w") as file:
            file.write(result.stdout)
        return
    try:
        split_ref = argv.index("--reference")
        split_cand = argv.index("--candidate")
    except ValueError:
        sys.exit(__doc__)
    parser = argparse.ArgumentParser()
    parser.add_argument("--metric", required=True)
    parser.add_argument("--tolerance", type=float)
    parser.add_argument("--worse-by", type=float)
    parser.add_argument("--relative", action="store_true")
    options = parser.parse_args(argv[:split_ref])
    reference = argv[split_ref + 1:split_cand]
    candidate = argv[split_cand + 1:]
    if len(reference) == 1 and reference[0].startswith("@"):
        with open(reference[0][1:]) as file:
            expected = metric_in(file.read(), options.metric, reference[0])
    else:
        expected = run(reference, options.metric)
    actual = run(candidate, options.metric)
    scale = abs(expected) if options.relative else 1.0
    if options.worse_by is not None:
        floor = expected + options.worse_by * scale
        print(f"reference {options.metric} {expected:.4f}, candidate "
              f"{actual:.4f}, which must be at least {floor:.4f}")
        if not actual >= floor:
            sys.exit(f"error: the candidate's {options.metric} {actual:.4f} "
                     f"is not measurably worse than the reference's "
                     f"{expected:.4f} (by {options.worse_by}"
                     f"{' relative' if options.relative else ''})")
        return
    if options.tolerance is None:
        sys.exit("error: give --tolerance or --worse-by")
    limit = expected + options.tolerance * scale
    print(f"reference {options.metric} {expected:.4f}, candidate "
          f"{actual:.4f}, allowed up to {limit:.4f}")
    if not actual <= limit:
        sys.exit(f"error: the candidate's {options.metric} {actual:.4f} is more "
                 f"than {options.tolerance}{' relative' if options.relative else ''}"
                 f" above the reference's {expected:.4f}")


if __name__ == "__main__":
    main()
