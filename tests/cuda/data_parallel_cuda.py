#!/usr/bin/env python3
"""Data parallel on the cuda target: 2 ranks against 1.

Every rank of `mpirun -np 2 train_steps --data-parallel` trains on the same
batches, so the NCCL sum over ranks is exactly 2x each rank's gradient and
the update, which divides by the world size, is what one process computes:
the 2-rank checkpoint must equal the 1-process one byte for byte, kernel
by kernel and as CUDA graphs (the gradient accumulator aside: between
steps it holds the last step's sum, over the ranks or not).

--mock: on the mock driver and mock NCCL (tests/cuda/mock_cuda.cpp), which
also check the communication schedule of steps 0, 1, 3 and 5 (those run;
plain runs,
graph captures and replays; with --accumulate=2, micro-batches that must
not communicate and ones that must) against the bucket plan of
`mpc compile --report=json`: each bucket all-reduced on a stream of its own
after an event recorded right after the kernel that finishes it, the
optimizer after a wait for all of them (train_steps.cpp --check-buckets).
Without --mock: on real GPUs and NCCL (the `gpu` label); exit 77 (skipped)
where a rank finds no CUDA device, such as on a machine with fewer than 2.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "data_parallel"))
import dp_test  # noqa: E402

SKIP = 77


def run(command, env):
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    sys.stdout.write(result.stdout)
    sys.stdout.write(result.stderr)
    if result.returncode != 0:
        if "no CUDA device: " in result.stdout + result.stderr:
            print("skipped: a rank has no CUDA device")
            sys.exit(SKIP)
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}")
    return result.stdout


def read_checkpoint(path):
    """dp_test.py's reading, the gradient accumulator left out: between steps
    it holds the last step's sum, over the ranks or not."""
    tensors, metadata = dp_test.read_checkpoint(path)
    return ({name: data for name, data in tensors.items()
             if not name.startswith("optimizer.grad_accumulator.")},
            {key: value for key, value in metadata.items()
             if "grad_accumulator" not in key})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--program", required=True)
    parser.add_argument("--model", required=True, help="the .mlir source")
    parser.add_argument("--options", default="",
                        help="mpc compile options of the program's model, "
                        "comma-separated")
    parser.add_argument("--mock", default=None,
                        help="the mock driver library (mock_cuda)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    env = dict(os.environ)
    check = []
    if args.mock:
        env.update(MPC_CUDA_DRIVER_LIBRARY=args.mock,
                   MPC_CUBLASLT_LIBRARY=args.mock, MPC_CUDNN_LIBRARY=args.mock,
                   MPC_NCCL_LIBRARY=args.mock, MPC_MOCK_DEVICES="2")
        options = [o for o in args.options.split(",") if o]
        report = json.loads(subprocess.run(
            [args.mpc, "compile", args.model, *options, "--report=json"],
            check=True, capture_output=True, text=True).stdout)
        buckets = report["data_parallel"]["buckets"]
        plan = ",".join(f"{b['offset']}:{b['bytes']}:{b['after_kernel']}"
                        for b in buckets)
        print(f"plan: {len(buckets)} buckets: {plan}")
        checked = ",".join(str(step) for step in (0, 1, 3, 5)
                           if step < args.steps)
        check = [f"--check-buckets={plan}", f"--check-steps={checked}"]

    mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe",
              "--mca", "btl", "self,vader", "-np", "2"]
    for graphs in ([], ["--cuda-graphs"]):
        tag = "graphs" if graphs else "launches"
        alone = os.path.join(args.work, f"alone_{tag}.safetensors")
        ranks = os.path.join(args.work, f"ranks_{tag}.safetensors")
        for path in (alone, ranks, ranks + ".rank1"):
            if os.path.exists(path):
                os.remove(path)
        run([args.program, f"--steps={args.steps}", f"--checkpoint={alone}",
             *graphs], env)
        run([*mpirun, args.program, "--data-parallel",
             f"--steps={args.steps}", f"--checkpoint={ranks}", *graphs,
             *check], env)
        theirs = read_checkpoint(alone)
        # With --shard-optimizer every rank saves (rank 1 to .rank1): its
        # parameters hold the shard rank 0 updated, as gathered.
        saved = [ranks] + [ranks + ".rank1"] * os.path.exists(ranks + ".rank1")
        for path in saved:
            ours = read_checkpoint(path)
            if ours != theirs:
                differ = [name for name in theirs[0]
                          if ours[0].get(name) != theirs[0][name]]
                sys.exit(f"{tag}: {os.path.basename(path)} differs from the "
                         f"1-process checkpoint: {differ or 'metadata'}")
        print(f"{tag}: 2 ranks end byte for byte where 1 process ends"
              f"{' (both ranks saved)' if len(saved) > 1 else ''}")
        if len(saved) > 1:
            # Sharded checkpoints move between world sizes: the ranks'
            # file loaded by 1 process, and the 1-process file by 2 ranks
            # (each keeping its shards on the device), saved again at once.
            moved = [(f"moved_to_1_{tag}.safetensors", [], ranks),
                     (f"moved_to_2_{tag}.safetensors",
                      [*mpirun, args.program, "--data-parallel"], alone)]
            for name, launch, source in moved:
                path = os.path.join(args.work, name)
                run([*(launch or [args.program]), "--steps=0",
                     f"--resume={source}", f"--checkpoint={path}", *graphs],
                    env)
                for saved_path in [path] + [path + ".rank1"] * bool(launch):
                    if read_checkpoint(saved_path) != theirs:
                        sys.exit(f"{tag}: {os.path.basename(saved_path)}, "
                                 f"loaded from {os.path.basename(source)} "
                                 "and saved, differs from it")
            print(f"{tag}: the checkpoint moves from 2 ranks to 1 and from "
                  "1 to 2 unchanged")


if __name__ == "__main__":
    main()
