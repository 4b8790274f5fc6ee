#!/usr/bin/env python3
"""The Python package (tools/python/mpc) against the C API.

  PYTHONPATH=build/python python3 test_mpc.py --library <libmlp.so> \
      --reference <train_batches>

The MLP example built with `mpc compile --shared` trains from Python on the
batches train_batches (the C API from C) trains on, with the same seed: the
losses must agree bit for bit. Then parameters, gradients, eval outputs,
stats and checkpoints from Python, and bad use, which must raise a clear
exception, never crash.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import mpc

ARGS = None
BATCH, FEATURES, CLASSES = 64, 784, 10


def batches(count, seed=7):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, FEATURES), dtype=np.float32),
             rng.integers(0, CLASSES, BATCH, dtype=np.int32))
            for _ in range(count)]


class PythonPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = mpc.load(ARGS.library)

    def test_model_metadata(self):
        self.assertEqual(self.model.name, "mlp")
        self.assertEqual([(i.name, i.dtype, i.shape) for i in self.model.inputs],
                         [("x", "f32", (64, 784)), ("y", "i32", (64,))])
        self.assertIn("fc1.weight", [p.name for p in self.model.params])

    def test_losses_match_the_c_api_bit_for_bit(self):
        data = batches(6)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "batches.bin")
            with open(path, "wb") as f:
                f.write(struct.pack("<i", len(data)))
                for x, y in data:
                    f.write(x.tobytes())
                    f.write(y.tobytes())
            out = subprocess.run([ARGS.reference, path, "3"], check=True,
                                 capture_output=True, text=True).stdout
        reference = [float.fromhex(line.split()[-1])
                     for line in out.splitlines()]
        with self.model.session(seed=3) as session:
            losses = [session.train_step(x, y) for x, y in data]
        self.assertEqual(len(reference), len(data))
        for step, (got, want) in enumerate(zip(losses, reference)):
            self.assertEqual(np.float32(got).tobytes(),
                             np.float32(want).tobytes(),
                             f"step {step}: {got!r} from Python, {want!r} "
                             "from C")

    def test_threads_change_nothing_but_the_threads(self):
        data = batches(3, seed=5)
        results = []
        for threads in (1, 2):
            with self.model.session(seed=4, threads=threads) as session:
                self.assertEqual(session.threads, threads)
                self.assertEqual(session.workspace_bytes, 0)
                losses = [session.train_step(x, y) for x, y in data]
                results.append((losses, session.param("fc1.weight")))
        self.assertEqual(results[0][0], results[1][0])
        np.testing.assert_array_equal(results[0][1], results[1][1])
        with self.assertRaises(mpc.MpcError):
            self.model.session(threads=-1)

    def test_parameters_gradients_eval_stats_and_checkpoints(self):
        (x, y), = batches(1, seed=11)
        with self.model.session(seed=1) as session:
            w = session.param("fc1.weight")
            self.assertEqual(w.dtype, np.float32)
            loss = session.compute_gradients(x, y)
            self.assertTrue(np.isfinite(loss))
            g = session.gradient("fc1.weight")
            self.assertEqual(g.shape, w.shape)
            self.assertGreater(np.abs(g).max(), 0)
            self.assertEqual(session.step, 0)
            session.train_step(x, y)
            self.assertEqual(session.step, 1)
            stats = session.stats()
            self.assertEqual(stats["optimizer_steps"], 1)
            self.assertEqual(stats["skipped_steps"], 0)
            eval_loss, outputs = session.eval(x, y)
            self.assertEqual(list(outputs), [o.name for o in
                                             self.model.outputs[1:]])
            for name, array in outputs.items():
                self.assertTrue(np.all(np.isfinite(array)), name)
            # set_param then param: the same values.
            changed = w * 0.5
            session.set_param("fc1.weight", changed)
            np.testing.assert_array_equal(session.param("fc1.weight"), changed)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "mlp.safetensors")
                session.save(path)
                with self.model.session(seed=2) as other:
                    self.assertTrue(other.load(path))
                    for name, value in session.params().items():
                        np.testing.assert_array_equal(other.param(name), value)
                # Weights alone, as from a PyTorch state_dict: a fresh
                # session takes the parameters and keeps its step.
                with self.model.session(seed=3) as other:
                    self.assertEqual(other.load_weights(path), ([], []))
                    self.assertEqual(other.step, 0)
                    for name, value in session.params().items():
                        np.testing.assert_array_equal(other.param(name), value)

    def test_bad_use_raises(self):
        (x, y), = batches(1)
        session = self.model.session()
        with self.assertRaisesRegex(ValueError, r"input 'x': shape \(64, 783\)"):
            session.train_step(x[:, :783], y)
        with self.assertRaisesRegex(TypeError, "input 'x': dtype float64"):
            session.train_step(x.astype(np.float64), y)
        with self.assertRaisesRegex(TypeError, "input 'y': dtype int64"):
            session.train_step(x, y.astype(np.int64))
        with self.assertRaisesRegex(TypeError, "expected a numpy array"):
            session.train_step(x.tolist(), y)
        with self.assertRaisesRegex(ValueError, "takes 2 inputs"):
            session.train_step(x)
        with self.assertRaisesRegex(mpc.MpcError, "MPC_ERROR_OUT_OF_RANGE: "
                                    "input 'y' element 0 is 10"):
            session.train_step(x, np.full(64, 10, np.int32))
        with self.assertRaisesRegex(mpc.MpcError, "no parameter or state "
                                    "'no.such'"):
            session.param("no.such")
        with self.assertRaisesRegex(mpc.MpcError, "MPC_ERROR_INVALID_ARGUMENT"):
            session.set_param("fc1.weight", np.zeros((784, 256), np.float32))
        # The report needs a model built with --debug-nonfinite.
        with self.assertRaisesRegex(mpc.MpcError, "MPC_ERROR_INVALID_ARGUMENT"):
            session.nonfinite_report()
        with self.assertRaisesRegex(mpc.MpcError, "MPC_ERROR_IO: cannot open"):
            session.load("/nonexistent/mlp.safetensors")
        with self.assertRaisesRegex(mpc.MpcError, "no CUDA device|"
                                    "compiled for the cpu target"):
            self.model.session(target="cuda")
        session.close()
        with self.assertRaisesRegex(mpc.MpcError, "the session is closed"):
            session.train_step(x, y)
        session.close()  # twice is fine
        with self.assertRaisesRegex(ValueError, "expected lib<model>.so"):
            mpc.load("/tmp/not-a-model.txt")


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", required=True)
    parser.add_argument("--reference", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
