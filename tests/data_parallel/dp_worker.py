"""One process of tests/data_parallel/dp_test.py: trains the MLP example
for --steps optimizer steps and saves a checkpoint.

  --ranks N (under mpirun -np N, with a --data-parallel build): rank r
      trains on micro-batch t*N + r of step t; with --rank-accumulate K
      (a build with --accumulate=K too), on micro-batches (t*N + r)*K + m,
      m = 0 .. K-1;
  --accumulate N (one process, an --accumulate=N build): micro-batches
      t*N + 0 .. t*N + N-1, in order, make step t.

Micro-batch --overflow-at holds an inf input, so that its gradients are
inf or NaN and the optimizer step it belongs to is skipped. Every rank
saves its checkpoint: rank r > 0 to <out>.rank<r>, and writes the loss
scaler's state and the gradient norm after every step to
<out>.scaler.rank<r>.

--fail-at STEP --fail-how {hang,kill,bad-input}: at that step rank 1 hangs,
is killed, or gets a label out of range. Rank 0 saves its checkpoint after
every step before that. A rank whose step fails prints
"rank R: <status>: <message>" and exits with code 3 (no MPI_Finalize, which
would wait for the missing rank): at once after a communication error,
twice the timeout later after its own.

--resume loads a checkpoint first; --first-step numbers the run's steps
(and so its micro-batches) from there.

--gradients (under mpirun): each rank computes its micro-batch's gradients
alone, then in the data-parallel session; rank 0 checks that
mpc_get_gradient returns the mean over the ranks, bit for bit.
"""

import argparse
import os
import signal
import sys
import time

import numpy as np

import mpc


SHAPES = ((64, 784), (64,))  # the model's inputs; main() reads them


def batch(index, overflow_at):
    rng = np.random.default_rng(1000 + index)
    x = rng.standard_normal(SHAPES[0], dtype=np.float32)
    if index == overflow_at:
        x.flat[0] = np.inf
    return x, rng.integers(0, 10, SHAPES[1], dtype=np.int32)


def check_gradients(model, args):
    with model.session(seed=5) as alone:
        names = [info.name for info in model.params]
        rank_inputs = None
        # The rank is only known from a data-parallel session: open it
        # first, then compute this rank's gradients alone.
        with model.session(seed=5, data_parallel=True) as session:
            rank, ranks = session.rank, session.world_size
            rank_inputs = batch(rank, -1)
            alone.compute_gradients(*rank_inputs)
            for name in names:
                np.save(f"{args.out}.rank{rank}.{name}.npy",
                        alone.gradient(name))
            session.compute_gradients(*rank_inputs)
            if rank == 0:
                for name in names:
                    total = np.zeros_like(session.gradient(name))
                    for r in range(ranks):
                        total = total + np.load(
                            f"{args.out}.rank{r}.{name}.npy")
                    mean = total / np.float32(ranks)
                    if not np.array_equal(session.gradient(name), mean):
                        sys.exit(f"FAIL: gradient of {name} is not the mean "
                                 "over the ranks")
                print(f"gradients: mpc_get_gradient is the mean over {ranks} "
                      f"ranks for {len(names)} parameters, bit for bit")
            if not args.sharded:
                return
            # A sharded train step sums only each rank's shard: no whole
            # gradient to return.
            session.train_step(*rank_inputs)
            try:
                session.gradient(names[0])
                sys.exit("FAIL: mpc_get_gradient after a sharded train step "
                         "returned gradients only partly summed")
            except mpc.MpcError as error:
                if "reduce-scatter" not in str(error):
                    sys.exit(f"FAIL: mpc_get_gradient after a sharded train "
                             f"step: {error}")
                if rank == 0:
                    print(f"gradients: after a sharded train step "
                          f"mpc_get_gradient says: {error}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--overflow-at", type=int, default=-1)
    parser.add_argument("--fail-at", type=int, default=-1)
    parser.add_argument("--fail-how", choices=["hang", "kill", "bad-input"])
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--resume", help="a checkpoint to start from")
    parser.add_argument("--first-step", type=int, default=0,
                        help="the optimizer step the run starts at")
    parser.add_argument("--sharded", action="store_true",
                        help="with --gradients: the library shards")
    parser.add_argument("--rank-accumulate", type=int, default=1,
                        help="with --ranks: micro-batches per step a rank")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--ranks", type=int)
    group.add_argument("--accumulate", type=int)
    group.add_argument("--gradients", action="store_true")
    args = parser.parse_args()
    model = mpc.load(args.lib)
    global SHAPES
    SHAPES = tuple(tuple(info.shape) for info in model.inputs)
    if args.gradients:
        check_gradients(model, args)
        return
    with model.session(seed=5, data_parallel=bool(args.ranks),
                       collective_timeout=args.timeout) as session:
        if args.resume:
            session.load(args.resume)
        steps = range(args.first_step, args.first_step + args.steps)
        if args.ranks:
            if session.world_size != args.ranks:
                sys.exit(f"FAIL: world size {session.world_size}, expected "
                         f"{args.ranks}")
            trajectory = open(f"{args.out}.scaler.rank{session.rank}", "w")
            for step in steps:
                first = (step * args.ranks + session.rank) * args.rank_accumulate
                for micro in range(args.rank_accumulate - 1):
                    session.train_step(*batch(first + micro, args.overflow_at))
                inputs = batch(first + args.rank_accumulate - 1,
                               args.overflow_at)
                if step == args.fail_at and session.rank == 1:
                    if args.fail_how == "hang":
                        # Longer than the others wait (they wait from the
                        # same step's start), then gone.
                        time.sleep(2 * (args.timeout or 5))
                        os._exit(3)
                    elif args.fail_how == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    else:
                        inputs[1][0] = 99  # 10 classes
                started = time.monotonic()
                try:
                    session.train_step(*inputs)
                except mpc.MpcError as error:
                    print(f"rank {session.rank}: {error} (after "
                          f"{time.monotonic() - started:.1f} s)", flush=True)
                    # A rank that failed on its own stays a while, as an
                    # application handling the status would, so that the
                    # others meet the timeout rather than mpirun's abort.
                    if "MPC_ERROR_COMMUNICATION" not in str(error):
                        time.sleep(2 * (args.timeout or 5))
                    os._exit(3)
                if args.fail_at >= 0 and session.rank == 0:
                    session.save(args.out)
                # The scaler's state after every step, for dp_test to hold
                # the ranks against each other.
                write_state(trajectory, step, session)
            trajectory.close()
            if args.fail_at >= 0:
                return
            suffix = f".rank{session.rank}" if session.rank else ""
            session.save(args.out + suffix)
            print(f"rank {session.rank} optimizer arena "
                  f"{session.arena_bytes('optimizer')} bytes, params arena "
                  f"{session.arena_bytes('params')} bytes", flush=True)
        else:
            # The same trajectory, which the ranks' must equal.
            with open(f"{args.out}.scaler.rank0", "w") as trajectory:
                for step in steps:
                    for micro in range(args.accumulate):
                        session.train_step(
                            *batch(step * args.accumulate + micro,
                                   args.overflow_at))
                    write_state(trajectory, step, session)
            session.save(args.out)


def write_state(trajectory, step, session):
    """The loss scaler's state and the gradient norm after a step."""
    stats = session.stats()
    trajectory.write(
        f"step {step} scaler {stats['loss_scale']!r} "
        f"{stats['steps_since_growth']} "
        f"{stats['hysteresis_left']} {stats['skipped_steps']} "
        f"grad norm {stats['grad_norm']!r}\n")


if __name__ == "__main__":
    main()
