#!/usr/bin/env python3
"""Trains the gated-MLP regressor (RMSNorm, SiLU gate, MSE) from Python.

  PYTHONPATH=build/python python3 train_regressor.py <libregressor.so>...

Each library is tests/Driver/Inputs/gated-mlp.mlir built with `mpc compile
--shared` (the tests build it at O0 and at O2 bf16, and load both into this
one process). The targets come from a fixed random
teacher of the same form as the features' smooth function, y = tanh(x A);
one batch of 32 rows is drawn per step with a fixed seed. Adam at its
compiled rate: after 300 steps the mean squared error on a held-out batch
must be below a quarter of the first step's loss, at every precision.
"""

import sys

import numpy as np

import mpc

STEPS = 300


def main():
    rng = np.random.default_rng(11)
    teacher = rng.standard_normal((16, 4)).astype(np.float32) / 4.0
    def batch():
        x = rng.standard_normal((32, 16)).astype(np.float32)
        return x, np.tanh(x @ teacher).astype(np.float32)
    held_out = batch()
    failed = False
    for library in sys.argv[1:]:
        model = mpc.load(library)
        with model.session(seed=3) as session:
            first = session.train_step(*batch())
            for _ in range(STEPS - 1):
                session.train_step(*batch())
            loss = session.eval(*held_out)[0]
        ok = loss < first / 4
        failed |= not ok
        print(f"{library}: first loss {first:.5f}, held-out loss after "
              f"{STEPS} steps {loss:.5f}: {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
