#!/usr/bin/env python3
"""Runs two training apps and checks that their losses are bit-identical.

  same_losses.py --reference <app> [args...] --candidate <app> [args...]

Each app gets --csv=<file> and writes one loss a step, printed with %.9g
(enough to round-trip an f32 exactly); the test fails unless every step's
loss is the same in both, and the final line ("final loss ..., corpus loss
...") too. Used to check that a transformation that must not change values
(mpc-fold-casts) changes none.
"""

import os
import subprocess
import sys
import tempfile


def run(command, csv):
    result = subprocess.run(command + [f"--csv={csv}"], capture_output=True,
                            text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)} exited {result.returncode}:\n"
                 f"{result.stdout}{result.stderr}")
    with open(csv) as file:
        rows = [line.strip().split(",") for line in file][1:]
    losses = [(row[0], row[1]) for row in rows]
    final = [line for line in result.stdout.splitlines() if "loss" in line][-1:]
    return losses, final


def main():
    argv = sys.argv[1:]
    try:
        split_ref = argv.index("--reference")
        split_cand = argv.index("--candidate")
    except ValueError:
        sys.exit(__doc__)
    reference = argv[split_ref + 1:split_cand]
    candidate = argv[split_cand + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        expected, expected_final = run(reference, os.path.join(tmp, "ref.csv"))
        actual, actual_final = run(candidate, os.path.join(tmp, "cand.csv"))
    if not expected:
        sys.exit("error: the reference wrote no losses")
    if len(expected) != len(actual):
        sys.exit(f"error: {len(expected)} steps against {len(actual)}")
    for (step, want), (_, got) in zip(expected, actual):
        if want != got:
            sys.exit(f"error: step {step}: loss {got} against the reference's "
                     f"{want}")
    if expected_final != actual_final:
        sys.exit(f"error: '{actual_final}' against '{expected_final}'")
    print(f"{len(expected)} step losses identical, last {expected[-1][1]}; "
          f"{expected_final[0] if expected_final else ''}")


if __name__ == "__main__":
    main()
