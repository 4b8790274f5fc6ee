#!/usr/bin/python3
"""Checks that max pooling routes each window's gradient to its argmax.

Loads a library of models/max_pool_routing.mlir (built with --shared at one
precision) and compares the gradient of its parameter w with one computed
here from the definition: each window's dy goes to the first maximum of the
window (padding excluded), h = x * w with w = 1, so the gradient of w is
dh * x. The inputs are distinct multiples of 1/16 and dy multiples of 1/8,
exact in f16 and bf16 alike, so the only rounding is the one the model's
precision applies to dh (a sum of a few dy) and to dh * x: the library must
equal the reference rounded so, bit for bit. At O0 that is the f32 gradient
(the row kernels); at O2 a half dx (a gather, a thread an input pixel,
from the argmax the forward stored) and, for the global pooling, the
argmax found again.

  max_pool_routing.py --library DIR/libpool_routing.so --half {none,f16,bf16}
"""

import argparse
import sys

import numpy as np

import mpc

N, C, H, W = 2, 3, 9, 9
KH, KW, STRIDE, PAD = 3, 2, 2, 1
OH = OW = 5


def rounded(values, half):
    """`values` (f32) rounded to nearest even in `half`, as f32."""
    if half == "f16":
        return values.astype(np.float16).astype(np.float32)
    if half == "bf16":
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
        return bits.astype(np.uint32).view(np.float32)
    return values


def routed(x, r, z):
    """The gradient of sum(pool(x) * r) + sum(global_pool(x) * z) in x."""
    dh = np.zeros_like(x)
    for n in range(N):
        for c in range(C):
            for oy in range(OH):
                for ox in range(OW):
                    best = None
                    for ky in range(KH):
                        for kx in range(KW):
                            iy, ix = oy * STRIDE - PAD + ky, ox * STRIDE - PAD + kx
                            if not (0 <= iy < H and 0 <= ix < W):
                                continue
                            if best is None or x[n, c, iy, ix] > x[n, c][best]:
                                best = (iy, ix)
                    dh[n, c][best] += r[n, c, oy, ox]
            plane = x[n, c]
            dh[n, c][np.unravel_index(np.argmax(plane), plane.shape)] += z[n, c, 0, 0]
    return dh


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True)
    parser.add_argument("--half", choices=["none", "f16", "bf16"],
                        required=True)
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    x = (rng.permutation(np.arange(-250, 250))[:N * C * H * W]
         .astype(np.float32).reshape(N, C, H, W) / 16)
    r = rng.integers(-8, 9, size=(N, C, OH, OW)).astype(np.float32) / 8
    z = rng.integers(-8, 9, size=(N, C, 1, 1)).astype(np.float32) / 8
    dh = rounded(routed(x, r, z), args.half)
    expected = rounded(dh * x, args.half)

    with mpc.load(args.library).session() as session:
        session.compute_gradients(x, r, z)
        got = np.asarray(session.gradient("w"))
    wrong = np.flatnonzero(got.ravel() != expected.ravel())
    if wrong.size:
        for i in wrong[:5]:
            print(f"w[{np.unravel_index(i, x.shape)}]: {got.ravel()[i]}, "
                  f"expected {expected.ravel()[i]}")
        print(f"FAIL: {wrong.size} of {x.size} gradients differ")
        return 1
    print(f"ok: {args.half}: {np.count_nonzero(expected)} gradients routed "
          f"to their windows' maxima, the rest 0, bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
