#!/usr/bin/env python3
"""Fails if a training step stores attention scores.

  check-no-scores.py report.json --seq=T

Reads `mpc compile --report=json` and looks at the tensors the train step's
memory plan keeps in the activation arena (memory.chosen.
train_activation_tensors): any whose last two dims are T x T (scores,
probabilities or their gradients, [..., T, T]) is reported, and the exit
status is 1. Otherwise it prints how many tensors it checked.
"""

import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--seq", type=int, required=True)
    args = parser.parse_args()
    with open(args.report) as file:
        tensors = json.load(file)["memory"]["chosen"]["train_activation_tensors"]
    if not tensors:
        sys.exit("check-no-scores: the report lists no activation tensors")
    square = [t for t in tensors if t["shape"][-2:] == [args.seq, args.seq]]
    for t in square:
        print(f"check-no-scores: {t['op']} at {t['location']} stores "
              f"{t['shape']} ({t['bytes']} bytes)", file=sys.stderr)
    if square:
        sys.exit(1)
    print(f"ok: {len(tensors)} activation tensors, none {args.seq} x {args.seq}")


if __name__ == "__main__":
    main()
