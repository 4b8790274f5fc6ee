#!/usr/bin/env python3
"""Prints the tensors a training step's memory plan stores, one a line.

  activation-tensors.py report.json

Reads `mpc compile --report=json` (memory.chosen.train_activation_tensors)
and prints `op location shape bytes` for each, largest first, so that a
FileCheck test can say which tensors are stored and which are not.
"""

import json
import sys


def main():
    with open(sys.argv[1]) as file:
        tensors = json.load(file)["memory"]["chosen"]["train_activation_tensors"]
    for t in tensors:
        shape = "x".join(str(d) for d in t["shape"]) or "scalar"
        print(f"{t['op']} {t['location']} {shape} {t['bytes']}")


if __name__ == "__main__":
    main()
