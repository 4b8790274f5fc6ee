#!/usr/bin/env python3
"""Runs two training apps and checks that their losses are bit-identical.

  same_losses.py [--rtol=X [--first-exact]] --reference <app> [args...]
      --candidate <app> [args...]

Each app gets --csv=<file> and writes one loss a step, printed with %.9g
(enough to round-trip an f32 exactly); the test fails unless every step's
loss is the same in both, and the final line ("final loss ..., corpus loss
...") too. Used to check that a transformation that must not change values
(mpc-fold-casts) changes none. With --rtol=X, each step's losses may
differ by X times the reference's instead (and the final line is not
compared): for a transformation that rounds less often. --first-exact
still requires the first step's loss to be bit-identical: for a
transformation that changes only the backward pass's arithmetic.
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
    rtol = None
    if argv and argv[0].startswith("--rtol="):
        rtol = float(argv.pop(0)[len("--rtol="):])
    first_exact = bool(argv) and argv[0] == "--first-exact"
    if first_exact:
        argv.pop(0)
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
    worst = 0.0
    if first_exact and expected[0][1] != actual[0][1]:
        sys.exit(f"error: step {expected[0][0]}: loss {actual[0][1]} against "
                 f"the reference's {expected[0][1]} (must be identical)")
    for (step, want), (_, got) in zip(expected, actual):
        if rtol is None:
            if want != got:
                sys.exit(f"error: step {step}: loss {got} against the "
                         f"reference's {want}")
            continue
        difference = abs(float(got) - float(want)) / abs(float(want))
        worst = max(worst, difference)
        if not difference <= rtol:
            sys.exit(f"error: step {step}: loss {got} against the reference's "
                     f"{want}, relative difference {difference:.3g} > {rtol}")
    if rtol is not None:
        print(f"{len(expected)} step losses within {rtol} (largest relative "
              f"difference {worst:.3g}{', the first identical' if first_exact else ''}), "
              f"last {expected[-1][1]}")
        return
    if expected_final != actual_final:
        sys.exit(f"error: '{actual_final}' against '{expected_final}'")
    print(f"{len(expected)} step losses identical, last {expected[-1][1]}; "
          f"{expected_final[0] if expected_final else ''}")


if __name__ == "__main__":
    main()
