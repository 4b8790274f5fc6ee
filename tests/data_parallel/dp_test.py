"""Data parallelism on the cpu target (issue 16): N ranks with batch B end,
bit for bit, where one process accumulating the same N micro-batches ends.

For sgd, adam and adamw, at O0 and at O2 f16 with dynamic loss scaling
(and adam at O2 bf16 with its moments in bf16: --optimizer-state=bf16), and
for N = 2 and 3: the MLP example built with --data-parallel trains 20 steps
under `mpirun -np N` (dp_worker.py); the same model built with
--accumulate=N trains the same micro-batches in one process. Rank 0's
checkpoint and the single process's must hold the same bytes for every
parameter and optimizer slot (the accumulator slot aside), and the same loss
scaler state and step counts; every other rank's checkpoint must equal rank
0's. One micro-batch, on one rank only, holds an inf: its step is skipped
on every rank (and the scale halved, with loss scaling), as in the single
process. The same holds with --shard-optimizer (ZeRO-1: each rank keeps and
updates 1/N of the optimizer state, then the parameters are gathered), whose
checkpoints hold the whole state. A control shows the comparison can fail:
the --data-parallel build run as one process (MPI's singleton) ends
elsewhere.

    dp_test.py --mpc build/bin/mpc --mpirun mpirun --model examples/mlp.mlir
               --work DIR --part PART [--stage build|test --libraries LIBS]

Each ctest runs one part (PARTS): the comparison above for one optimizer
and level, or one of the checks below. The CMake build compiles each
part's libraries (--stage=build, into LIBS) and the test checks with them
(--stage=test); without --stage the part compiles them as it goes.

mpc_get_gradient on 3 ranks is the mean of the ranks' gradients (and after
a --shard-optimizer train step, which sums only each rank's shard, an
error), and the
ResNet example's batch-norm statistics follow rank 0's on every rank;
with dropout, and with delayed FP8 scaling (its table the largest amax
over the ranks), 2 ranks still end where --accumulate=2 ends; a bucket per
gradient (--bucket-mb) changes no bit.
A 2-rank checkpoint resumed on 1 rank (--accumulate=2) continues as the
uninterrupted 2-rank run, and on 3 ranks as one process accumulating 3.
Then rank 1 hangs, is killed, or gets a bad label: rank 0 fails within the
collective timeout naming rank 1, and its last checkpoint loads. Ranks
started the torchrun way (environment variables, no MPI) end where the
mpirun ranks end, and fail the same way.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCALER_KEYS = ["loss_scale", "loss_scale_growth_tracker",
               "loss_scale_hysteresis_left", "optimizer_steps",
               "skipped_steps"]


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def read_checkpoint(path):
    with open(path, "rb") as file:
        size = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(size))
        data = file.read()
    metadata = header.pop("__metadata__", {})
    tensors = {name: data[slice(*entry["data_offsets"])]
               for name, entry in header.items()}
    return tensors, metadata


def different(tensors, metadata, reference, reference_metadata):
    """What differs, of the tensors in `tensors` and the scaler state."""
    problems = [name for name, data in tensors.items()
                if reference.get(name) != data]
    problems += [f"metadata {key}: {metadata.get(key)} vs "
                 f"{reference_metadata.get(key)}" for key in SCALER_KEYS
                 if metadata.get(key) != reference_metadata.get(key)]
    return problems


def check_failing_rank(args, mpirun, worker, library):
    """Rank 1 hangs, is killed, or gets a bad label at step 3 of 2 ranks:
    rank 0's step fails within the 3 s timeout (at once for the killed
    rank, whose connections close) naming rank 1, instead of
    waiting forever, and its checkpoint of step 2 is intact. mpirun aborts
    a job when a rank dies, before anyone could time out, unless it runs
    with --enable-recovery. The three jobs run at once: they mostly wait."""
    hows = ["hang", "kill", "bad-input"]
    jobs = {how: subprocess.Popen(
        [*mpirun[:-1], "--enable-recovery", "-np", "2", *worker, "--lib",
         library, "--out", os.path.join(args.work, f"failing_{how}"),
         "--ranks", "2", "--fail-at", "3", "--fail-how", how, "--timeout",
         "3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for how in hows}
    failures = 0
    for how in hows:
        checkpoint = os.path.join(args.work, f"failing_{how}")
        output = jobs[how].communicate(timeout=120)[0]
        # A killed rank's connections close at once; Gloo says so.
        expected = ["rank 0: MPC_ERROR_COMMUNICATION",
                    "rank 1 closed its connection" if how == "kill" else
                    "rank 1 did not arrive within 3 s"]
        if how == "bad-input":
            expected.append("rank 1: MPC_ERROR_OUT_OF_RANGE: input 'y' "
                            "element 0 is 99, outside [0, 10)")
        problems = [f"no '{text}'" for text in expected if text not in output]
        waited = re.search(r"rank 0: .* \(after ([0-9.]+) s\)", output)
        seconds = float(waited.group(1)) if waited else float("inf")
        if seconds > 3 + 2:
            problems.append(f"rank 0 failed after {seconds} s, not within "
                            "the 3 s timeout")
        # The step before the failure was saved, and loads as it was.
        tensors, metadata = read_checkpoint(checkpoint)
        if metadata.get("step") != "3":
            problems.append(f"the checkpoint is of step {metadata.get('step')}, "
                            "expected 3")
        probe = subprocess.run(
            [sys.executable, "-c",
             "import mpc, sys; s = mpc.load(sys.argv[1]).session(); "
             "s.load(sys.argv[2]); print(s.step)", library, checkpoint],
            capture_output=True, text=True)
        if probe.returncode != 0 or probe.stdout.strip() != "3":
            problems.append(f"the checkpoint does not load: {probe.stderr}")
        if problems:
            failures += 1
            print(f"FAIL: rank 1 {how}: {', '.join(problems)}\n{output}")
        else:
            print(f"ok: rank 1 {how} at step 3: rank 0 fails in {seconds:.1f} "
                  "s naming rank 1; its checkpoint of the step before loads")
    return failures


def check_accumulate_on_ranks(args, mpirun, worker):
    """2 ranks with --accumulate=2 each: the ranks sum their accumulators
    once per optimizer step, which equals one process accumulating the 4
    micro-batches up to the order of the sums (the scaler's state exactly).
    SGD, whose update is linear in the gradient: Adam's first steps divide
    gradients near 0 by their own size, turning rounding into whole steps.
    With --shard-optimizer too (each rank's accumulator whole, the momentum
    sharded), the 2 ranks end where the unsharded ranks end, bit for bit,
    every rank keeping about half the momentum."""
    import numpy as np
    work = lambda name: os.path.join(args.work, f"rank_accumulate_{name}")
    libraries = {name: args.libraries.path(f"rank_accumulate_{name}")
                 for name in ["dp", "dp_shard", "acc4"]}
    # Rank 1's second micro-batch of step 3 overflows.
    overflow = ["--overflow-at", str(3 * 4 + 3)]
    arenas = {}
    for name, out in [("dp", "ranks"), ("dp_shard", "ranks_sharded")]:
        output = run([*mpirun, "2", *worker, "--lib", libraries[name],
                      "--out", work(out), "--ranks", "2", "--rank-accumulate",
                      "2", *overflow])
        # A rank's optimizer and params arenas together: at O2 the
        # sharded master weights move from the one to the other.
        arenas[name] = [int(optimizer) + int(params)
                        for optimizer, params in re.findall(
                            r"rank \d+ optimizer arena (\d+) bytes, params "
                            r"arena (\d+) bytes", output)]
    run([*worker, "--lib", libraries["acc4"], "--out", work("single"),
         "--accumulate", "4", *overflow])
    ours, ours_meta = read_checkpoint(work("ranks"))
    theirs, theirs_meta = read_checkpoint(work("single"))
    problems = [f"metadata {key}" for key in SCALER_KEYS
                if ours_meta.get(key) != theirs_meta.get(key)]
    worst, exact = 0.0, 0
    for name, data in theirs.items():
        if "accumulator" in name:
            continue
        a = np.frombuffer(ours[name], np.float32).astype(np.float64)
        b = np.frombuffer(data, np.float32).astype(np.float64)
        error = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12)
        worst = max(worst, error)
        exact += int(ours[name] == data)
    # The forward pass reads f16 copies of the parameters: a last-bit
    # difference in an f32 master weight can move its copy by one f16 ulp
    # (2^-10 relative). Measured: 6.5e-5.
    if worst > 1e-3:
        problems.append(f"relative difference {worst:.2e} > 1e-3")
    if ours_meta.get("skipped_steps") != "1":
        problems.append("the overflowed step was not skipped")
    sharded = different(*read_checkpoint(work("ranks_sharded")), ours,
                        ours_meta)
    sharded += [f"rank 1: {problem}" for problem in different(
        *read_checkpoint(work("ranks_sharded") + ".rank1"), ours, ours_meta)]
    if sharded:
        problems.append("sharded, differs from unsharded in " +
                        ", ".join(sharded))
    # The accumulator (4 bytes a parameter) and the half copies (2) whole,
    # the momentum (4) and the f32 master weights (4) halved: 14 bytes a
    # parameter become 10.
    whole, halved = max(arenas["dp"]), max(arenas["dp_shard"])
    if len(arenas["dp_shard"]) != 2 or not halved < 0.75 * whole:
        problems.append(f"sharded optimizer and params arenas "
                        f"{arenas['dp_shard']} bytes, unsharded {whole}")
    if problems:
        print(f"FAIL: 2 ranks x --accumulate=2: {', '.join(problems)}")
        return 1
    print(f"ok: 2 ranks x --accumulate=2 end where --accumulate=4 ends to "
          f"{worst:.1e} (largest difference relative to a tensor's largest "
          f"value; {exact} of {len(theirs)} tensors bit for bit), the scaler "
          f"exactly; sharded, bit for bit the unsharded ranks, {halved} "
          f"bytes of optimizer and params arenas a rank instead of {whole}")
    return 0


def check_bucket_size(args, mpirun, worker, reference):
    """--bucket-mb=0.001 puts each of the MLP's gradients in a bucket of its
    own (4 sums instead of 2): 3 ranks end where 3 ranks with 25 MiB
    buckets end, bit for bit, since every element is summed in rank order
    whatever its bucket (Adam, O2 f16, the same overflow)."""
    ours = os.path.join(args.work, "adam_O2_f16_np3_small_buckets")
    run([*mpirun, "3", *worker, "--lib",
         args.libraries.path("adam_O2_f16_dp_small_buckets"),
         "--out", ours, "--ranks", "3", "--overflow-at", str(3 * 3 + 1)])
    problems = different(*read_checkpoint(ours), *read_checkpoint(reference))
    if problems:
        print(f"FAIL: 3 ranks, 1 KiB buckets: {', '.join(problems)}")
        return 1
    print("ok: 3 ranks with a bucket per gradient end where 25 MiB buckets "
          "end, bit for bit")
    return 0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(ranks, command, timeout=300, world_size=None):
    """Starts `ranks` processes of `command` as torchrun would: RANK,
    WORLD_SIZE (`ranks` unless given), MASTER_ADDR and MASTER_PORT, no MPI.
    Their outputs."""
    port = str(free_port())
    processes = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank),
                   WORLD_SIZE=str(world_size or ranks), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        env.pop("OMPI_COMM_WORLD_SIZE", None)
        processes.append(subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    return [(process.communicate(timeout=timeout)[0], process.returncode)
            for process in processes]


def check_torchrun(args, worker, runs, work):
    """Ranks started the torchrun way (environment variables, Gloo, no MPI)
    end byte for byte where the mpirun ranks end, sharded or not; a rank
    that dies or hangs makes rank 0 fail within the timeout naming it (in
    a ring of 3, a dead rank as one of rank 0's two neighbours: Gloo names
    a closed connection by address only), and a rank that never starts
    makes the others fail joining, naming it."""
    failures = 0
    for label, ranks, shard in [("3 ranks", 3, ""),
                                ("2 ranks, sharded", 2, " sharded")]:
        reference = runs.on_ranks("adam", "O2_f16", ranks, shard)
        library = runs.library("adam", "O2_f16",
                               "dp_shard" if shard else "dp")
        out = reference + "_torchrun"
        results = torchrun(ranks, [*worker, "--lib", library, "--out", out,
                                   "--ranks", str(ranks), "--overflow-at",
                                   str(3 * ranks + 1)])
        problems = [f"exit {code}: {output}" for output, code in results
                    if code != 0]
        if not problems:
            with open(out, "rb") as ours, open(reference, "rb") as theirs:
                if ours.read() != theirs.read():
                    problems.append("the checkpoint differs from mpirun's")
        if problems:
            failures += 1
            print(f"FAIL: torchrun-style {label}: {', '.join(problems)}")
        else:
            print(f"ok: torchrun-style {label} (RANK, WORLD_SIZE, MASTER_ADDR, "
                  "MASTER_PORT; Gloo, no MPI): the checkpoint is mpirun's, "
                  "byte for byte")
    sgd = runs.library("sgd", "O0", "dp")
    cases = [("kill", 2, "rank 1 closed its connection"),
             ("hang", 2, "rank 1 did not arrive within 3 s"),
             ("kill", 3, "rank 2 or 1 (this rank's neighbours in Gloo's "
                         "ring) closed its connection"),
             ("hang", 3, "rank 1 did not arrive within 3 s")]
    # Every case mostly waits: they run at once, and with them WORLD_SIZE=3
    # where rank 2 never starts.
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(len(cases) + 1) as pool:
        for how, ranks, expected in cases:
            checkpoint = work(f"torchrun_failing_{how}_{ranks}")
            jobs[how, ranks] = (checkpoint, pool.submit(
                torchrun, ranks, [*worker, "--lib", sgd, "--out", checkpoint,
                                  "--ranks", str(ranks), "--fail-at", "3",
                                  "--fail-how", how, "--timeout", "3"],
                timeout=120))
        missing = pool.submit(
            torchrun, 2, [*worker, "--lib", sgd, "--out",
                          work("torchrun_missing"), "--ranks", "3",
                          "--timeout", "3"], timeout=120, world_size=3)
    for how, ranks, expected in cases:
        checkpoint, job = jobs[how, ranks]
        output = job.result()[0][0]
        waited = re.search(r"rank 0: .* \(after ([0-9.]+) s\)", output)
        problems = [] if expected in output else [f"no '{expected}'"]
        if not waited or float(waited.group(1)) > 3 + 2:
            problems.append("rank 0 did not fail within the timeout")
        if read_checkpoint(checkpoint)[1].get("step") != "3":
            problems.append("its checkpoint is not that of step 3")
        what = "is killed" if how == "kill" else "hangs"
        if problems:
            failures += 1
            print(f"FAIL: torchrun-style, {ranks} ranks, rank 1 {what}: "
                  f"{', '.join(problems)}\n{output}")
        else:
            print(f"ok: torchrun-style, {ranks} ranks, rank 1 {what} at step "
                  f"3: rank 0 fails in {float(waited.group(1)):.1f} s: "
                  f"{expected}")
    results = missing.result()
    expected = "rank 2 did not join within 3 s"
    problems = [f"rank {rank} exited {code}, not failing with "
                f"'{expected}':\n{output}"
                for rank, (output, code) in enumerate(results)
                if code == 0 or expected not in output]
    if problems:
        failures += 1
        print(f"FAIL: torchrun-style, rank 2 never starts: {problems}")
    else:
        print(f"ok: torchrun-style, rank 2 never starts: ranks 0 and 1 fail: "
              f"{expected}")
    return failures


def check_world_size_moves(args, mpirun, worker, lib):
    """A 2-rank checkpoint of step 10 resumed on 1 rank (--accumulate=2)
    ends where the uninterrupted 2-rank run ends after 20 steps; resumed on
    3 ranks, it ends where one process accumulating the same 3 micro-batches
    per step from the same checkpoint ends."""
    work = lambda name: os.path.join(args.work, f"moves_{name}")
    run([*mpirun, "2", *worker, "--lib", lib("dp"), "--out", work("step10"),
         "--ranks", "2", "--steps", "10"])
    run([*mpirun, "2", *worker, "--lib", lib("dp"), "--out", work("full"),
         "--ranks", "2", "--steps", "20"])
    resumed = ["--resume", work("step10"), "--first-step", "10", "--steps",
               "10"]
    run([*worker, "--lib", lib("acc2"), "--out", work("on1"),
         "--accumulate", "2", *resumed])
    run([*mpirun, "3", *worker, "--lib", lib("dp"), "--out", work("on3"),
         "--ranks", "3", *resumed])
    run([*worker, "--lib", lib("acc3"), "--out", work("on3_reference"),
         "--accumulate", "3", *resumed])
    failures = 0
    # Sharded: the checkpoint is the same file, and it moves the same way.
    run([*mpirun, "2", *worker, "--lib", lib("dp_shard"), "--out",
         work("step10_shard"), "--ranks", "2", "--steps", "10"])
    run([*mpirun, "3", *worker, "--lib", lib("dp_shard"), "--out",
         work("on3_shard"), "--ranks", "3", "--resume", work("step10_shard"),
         "--first-step", "10", "--steps", "10"])
    with open(work("step10"), "rb") as a, open(work("step10_shard"), "rb") as b:
        if a.read() != b.read():
            failures += 1
            print("FAIL: the sharded 2-rank checkpoint is not the unsharded "
                  "one's bytes")
        else:
            print("ok: a 2-rank --shard-optimizer checkpoint is byte for byte "
                  "the unsharded one")
    # Saved between the micro-batches of a step, the accumulator matters:
    # only the same --accumulate may continue it.
    probe = subprocess.run(
        [sys.executable, "-c",
         "import mpc, sys, numpy as np\n"
         "s = mpc.load(sys.argv[1]).session()\n"
         "x = np.zeros((64, 784), np.float32); y = np.zeros(64, np.int32)\n"
         "for _ in range(3): s.train_step(x, y)\n"
         "s.save(sys.argv[3])\n"
         "try:\n"
         "    mpc.load(sys.argv[2]).session().load(sys.argv[3])\n"
         "except mpc.MpcError as error:\n"
         "    print(error)\n",
         lib("acc2"), lib("acc3"), work("mid_step")],
        capture_output=True, text=True)
    expected = ("MPC_ERROR_FORMAT: '" + work("mid_step") + "' was saved in the "
                "middle of an optimizer step of 2 micro-batches; only a build "
                "with --accumulate=2 can continue it (this one has 3)")
    if expected not in probe.stdout:
        failures += 1
        print(f"FAIL: a mid-step checkpoint: expected {expected!r}, got "
              f"{probe.stdout}{probe.stderr}")
    else:
        print("ok: a checkpoint saved between micro-batches is refused by "
              "another --accumulate")
    for label, ours, theirs in [
            ("2 ranks -> 1 rank (--accumulate=2)", "full", "on1"),
            ("2 ranks -> 3 ranks", "on3", "on3_reference"),
            ("2 ranks -> 3 ranks, sharded", "on3_shard", "on3_reference")]:
        ours_tensors, ours_meta = read_checkpoint(work(ours))
        problems = different(ours_tensors, ours_meta,
                             *read_checkpoint(work(theirs)))
        if problems:
            failures += 1
            print(f"FAIL: checkpoint {label}: {', '.join(problems)}")
        else:
            print(f"ok: a checkpoint moves {label} and training continues "
                  "bit for bit")
    return failures


def check_state_follows_rank0(args, mpirun, worker):
    """The ResNet example's batch-norm running statistics, which each
    rank's batch moves, follow rank 0's after every step: the ranks' whole
    checkpoints stay equal."""
    out = os.path.join(args.work, "resnet_np2")
    run([*mpirun, "2", *worker, "--lib", args.libraries.path("resnet_dp"),
         "--out", out, "--ranks", "2", "--steps", "3"])
    tensors, metadata = read_checkpoint(out)
    problems = different(*read_checkpoint(out + ".rank1"), tensors, metadata)
    states = [name for name in tensors if "running_" in name]
    if problems or not states:
        print(f"FAIL: ResNet on 2 ranks: rank 1 differs from rank 0: "
              f"{', '.join(problems) or 'no running statistics'}")
        return 1
    print(f"ok: ResNet on 2 ranks: both ranks hold the same {len(tensors)} "
          f"tensors, {len(states)} running statistics among them")
    return 0


def check_dropout(args, mpirun, worker):
    """With dropout, rank r's micro-batch of step t draws the masks of
    micro-batch t*N + r, so 2 ranks still end where --accumulate=2 ends."""
    libraries = {name: args.libraries.path(f"dropout_{name}")
                 for name in ["dp", "acc2"]}
    ours = os.path.join(args.work, "dropout_np2")
    theirs = ours + "_accumulate"
    run([*mpirun, "2", *worker, "--lib", libraries["dp"], "--out", ours,
         "--ranks", "2"])
    run([*worker, "--lib", libraries["acc2"], "--out", theirs,
         "--accumulate", "2"])
    problems = different(*read_checkpoint(ours), *read_checkpoint(theirs))
    if problems:
        print(f"FAIL: dropout on 2 ranks differs from --accumulate=2: "
              f"{', '.join(problems)}")
        return 1
    print("ok: dropout on 2 ranks: the same masks and the same end as "
          "--accumulate=2, bit for bit")
    return 0


def check_sharded_master_copies(args, mpirun, worker):
    """Sharded master weights with f32 copies: a model whose layer norm the
    steps read in f32 at O2 (its weight and bias get whole f32 copies,
    which each rank writes for its shard and the ranks sum), on 2 ranks
    (whose shards meet inside ln.bias) and 3, ends where --accumulate=N
    ends, bit for bit; a stale copy would change every later step."""
    failures = 0
    for ranks in [2, 3]:
        libraries = {name: args.libraries.path(f"ln_{name}{ranks}")
                     for name in ["shard", "acc"]}
        header = open(os.path.join(os.path.dirname(libraries["shard"]),
                                   "layer_norm_mlp.cpp")).read()
        if "layer_norm_mlp_param_copies[] = {-1, -1, 0, 256," not in header:
            print("FAIL: the layer norm's parameters have no f32 copies")
            failures += 1
            continue
        ours = os.path.join(args.work, f"ln_np{ranks}")
        theirs = ours + "_accumulate"
        # Step 3 overflows on rank 1 and is skipped: the copies stay.
        overflow = ["--overflow-at", str(3 * ranks + 1)]
        run([*mpirun, str(ranks), *worker, "--lib", libraries["shard"],
             "--out", ours, "--ranks", str(ranks), *overflow])
        run([*worker, "--lib", libraries["acc"], "--out", theirs,
             "--accumulate", str(ranks), *overflow])
        tensors, metadata = read_checkpoint(ours)
        problems = different(tensors, metadata, *read_checkpoint(theirs))
        if metadata["skipped_steps"] != "1":
            problems.append(f"{metadata['skipped_steps']} steps skipped, "
                            "expected the overflowed one")
        for rank in range(1, ranks):
            problems += [f"rank {rank}: {problem}" for problem in different(
                *read_checkpoint(f"{ours}.rank{rank}"), tensors, metadata)]
        if problems:
            failures += 1
            print(f"FAIL: layer norm, {ranks} sharded ranks: differs from "
                  f"--accumulate={ranks}: {', '.join(problems)}")
        else:
            print(f"ok: layer norm, {ranks} sharded ranks, master weights "
                  "sharded, its f32 copies summed: every rank ends where "
                  f"--accumulate={ranks} ends, bit for bit")
    return failures


def check_fp8_delayed(args, mpirun, worker):
    """Delayed FP8 scaling (--fp8-scaling=delayed): the ranks' amaxes of a
    step become the largest over the ranks before the table's update, as
    one process accumulating the micro-batches raises one amax over them,
    so 2 ranks end where --accumulate=2 ends, the table (fp8.scaling, its
    scales and histories) included, and both ranks hold the same table."""
    libraries = {name: args.libraries.path(f"fp8_{name}")
                 for name in ["dp", "acc2"]}
    ours = os.path.join(args.work, "fp8_np2")
    theirs = ours + "_accumulate"
    run([*mpirun, "2", *worker, "--lib", libraries["dp"], "--out", ours,
         "--ranks", "2", "--steps", "8"])
    run([*worker, "--lib", libraries["acc2"], "--out", theirs,
         "--accumulate", "2", "--steps", "8"])
    tensors, metadata = read_checkpoint(ours)
    problems = different(tensors, metadata, *read_checkpoint(theirs))
    problems += different(*read_checkpoint(ours + ".rank1"), tensors,
                          metadata)
    table = tensors.get("fp8.scaling")
    if problems or not table or not any(table):
        print(f"FAIL: FP8 delayed scaling on 2 ranks: "
              f"{', '.join(problems) or 'no table'}")
        return 1
    print("ok: FP8 delayed scaling on 2 ranks: the same table and the same "
          "end as --accumulate=2, bit for bit, on both ranks")
    return 0


LEVELS = {"O0": ["--amp=O0"],
          "O2_f16": ["--amp=O2", "--half=f16", "--loss-scale=dynamic"],
          # bf16 moments beside the f32 master weights: sharded, each
          # slot's shard is in its own dtype.
          "O2_bf16_state": ["--amp=O2", "--half=bf16",
                            "--optimizer-state=bf16"]}
PARTS = ([f"{optimizer}_{level}" for optimizer in ["sgd", "adam", "adamw"]
          for level in LEVELS] +
         ["moves", "failing_rank", "gradients", "state", "dropout",
          "master_copies",
          "accumulate_on_ranks", "buckets", "torchrun", "fp8_delayed"])


def matrix_library(optimizer, level, kind):
    """The MLP's library name and flags for one optimizer and level; kind:
    dp, dp_shard or acc<N>."""
    # AdamW clips (the MLP's norm is above 1 in most of its 20 steps), so
    # that the gradient norm a sharded step sums from its ranks' chunks
    # reaches the parameters.
    flags = [*LEVELS[level], f"--optimizer={optimizer}", "--lr=0.01",
             "--momentum=0.9" if optimizer == "sgd" else "--beta1=0.9",
             "--weight-decay=0.01",
             *(["--clip-norm=1.0"] if optimizer == "adamw" else [])]
    extra = {"dp": ["--data-parallel"],
             "dp_shard": ["--data-parallel", "--shard-optimizer"]}.get(
                 kind, [f"--accumulate={kind[3:]}"])
    return f"{optimizer}_{level}_{kind}", (None, [*flags, *extra])


def part_libraries(part):
    """The libraries a part trains: {name: (model, flags)}, the model a
    file beside this one's tests (None: --model, the MLP example)."""
    matrix = lambda optimizer, level, kinds: dict(
        matrix_library(optimizer, level, kind) for kind in kinds)
    if part in PARTS[:3 * len(LEVELS)]:
        optimizer, level = part.split("_", 1)
        return matrix(optimizer, level, ["dp", "dp_shard", "acc2", "acc3"])
    if part == "moves":
        return matrix("adam", "O2_f16", ["dp", "dp_shard", "acc2", "acc3"])
    if part == "failing_rank":
        return matrix("adamw", "O2_f16", ["dp"])
    if part == "gradients":
        return matrix("sgd", "O0", ["dp", "dp_shard"])
    if part == "buckets":
        _, (_, flags) = matrix_library("adam", "O2_f16", "dp")
        return {**matrix("adam", "O2_f16", ["dp"]),
                "adam_O2_f16_dp_small_buckets": (None,
                                                 [*flags, "--bucket-mb=0.001"])}
    if part == "torchrun":
        return {**matrix("adam", "O2_f16", ["dp", "dp_shard"]),
                **matrix("sgd", "O0", ["dp"])}
    if part == "state":
        return {"resnet_dp": ("../../examples/resnet.mlir",
                              ["--data-parallel", "--optimizer=sgd",
                               "--momentum=0.9"])}
    if part == "dropout":
        return {f"dropout_{name}": ("../e2e/models/dropout_mlp.mlir",
                                    ["--optimizer=adam", "--lr=0.01", flag])
                for name, flag in [("dp", "--data-parallel"),
                                   ("acc2", "--accumulate=2")]}
    if part == "master_copies":
        flags = [*LEVELS["O2_f16"], "--optimizer=adamw", "--lr=0.01",
                 "--weight-decay=0.01", "--clip-norm=1.0"]
        return {f"ln_{name}{ranks}": ("../e2e/models/layer_norm_mlp.mlir",
                                      [*flags, *extra])
                for ranks in [2, 3]
                for name, extra in [("shard", ["--data-parallel",
                                               "--shard-optimizer"]),
                                    ("acc", [f"--accumulate={ranks}"])]}
    if part == "accumulate_on_ranks":
        flags = ["--optimizer=sgd", "--lr=0.01", "--momentum=0.9", "--amp=O2",
                 "--half=f16", "--loss-scale=dynamic"]
        return {f"rank_accumulate_{name}": (None, [*flags, *extra])
                for name, extra in [
                    ("dp", ["--data-parallel", "--accumulate=2"]),
                    ("dp_shard", ["--data-parallel", "--accumulate=2",
                                  "--shard-optimizer"]),
                    ("acc4", ["--accumulate=4"])]}
    if part == "fp8_delayed":
        options = ["--amp=O2", "--half=bf16", "--fp8=all",
                   "--fp8-scaling=delayed", "--fp8-history=4",
                   "--optimizer=adam", "--lr=0.01"]
        return {f"fp8_{name}": (None, [*options, flag])
                for name, flag in [("dp", "--data-parallel"),
                                   ("acc2", "--accumulate=2")]}
    raise KeyError(part)


class Libraries:
    """The compiled libraries of one part (part_libraries), each in a
    directory of its own under `directory`. --stage=build compiles them
    all (the CMake build runs it, with record_status.sh) and the test
    (--stage=test) uses them, after checking that each was compiled from
    the same model with the same flags; without --stage a part compiles
    what it uses, when it first uses it."""

    def __init__(self, args, directory):
        self.args, self.directory = args, directory
        self.wanted = part_libraries(args.part)

    def source(self, name):
        model, flags = self.wanted[name]
        model = (os.path.normpath(os.path.join(HERE, model)) if model
                 else os.path.abspath(self.args.model))
        return model, flags, " ".join([model, *flags])

    def path(self, name):
        if name not in self.wanted:
            sys.exit(f"FAIL: part {self.args.part} uses library {name}, "
                     "which part_libraries does not list for it")
        model, flags, recipe = self.source(name)
        directory = os.path.join(self.directory, name)
        library = os.path.join(
            directory, f"lib{os.path.splitext(os.path.basename(model))[0]}.so")
        stamp = os.path.join(directory, "recipe")
        if self.args.stage == "test":
            built = open(stamp).read() if os.path.exists(stamp) else None
            if built != recipe or not os.path.exists(library):
                sys.exit(f"FAIL: {directory} was not built from {recipe} "
                         f"(built: {built}): the build's --stage=build and "
                         "the test disagree")
        elif not os.path.exists(stamp):
            run([self.args.mpc, "compile", model, "--shared", "-o",
                 directory, *flags])
            with open(stamp, "w") as file:
                file.write(recipe)
        return library

    def build_all(self):
        for name in self.wanted:
            self.path(name)


class Runs:
    """The multi-rank runs of one part, made once each in the part's work
    directory."""

    def __init__(self, args, mpirun, worker):
        self.args, self.mpirun, self.worker = args, mpirun, worker
        self.arena_bytes = {}

    def library(self, optimizer, level, kind):
        """kind: dp, dp_shard or acc<N>."""
        return self.args.libraries.path(
            matrix_library(optimizer, level, kind)[0])

    def on_ranks(self, optimizer, level, ranks, shard):
        """Trains on `ranks` ranks, rank 1's micro-batch of step 3 holding
        an inf; the checkpoint's path."""
        out = os.path.join(self.args.work,
                           f"{optimizer}_{level}_np{ranks}{shard.strip()}")
        if not os.path.exists(out):
            library = self.library(optimizer, level,
                                   "dp_shard" if shard else "dp")
            output = run([*self.mpirun, str(ranks), *self.worker, "--lib",
                          library, "--out", out, "--ranks", str(ranks),
                          "--overflow-at", str(3 * ranks + 1)])
            self.arena_bytes[(optimizer, level, ranks, shard)] = {
                int(rank): (int(optimizer_bytes), int(params_bytes))
                for rank, optimizer_bytes, params_bytes in re.findall(
                    r"rank (\d+) optimizer arena (\d+) bytes, params arena "
                    r"(\d+) bytes", output)}
        return out


def check_matches_accumulation(runs, optimizer, level):
    """N ranks end where one process accumulating N micro-batches ends."""
    failures = 0
    for ranks, shard in [(2, ""), (3, ""), (2, " sharded"), (3, " sharded")]:
        ours = runs.on_ranks(optimizer, level, ranks, shard)
        arena = runs.arena_bytes[(optimizer, level, ranks, shard)]
        # One process's run, the same for the sharded ranks: made once.
        theirs = os.path.join(runs.args.work,
                              f"{optimizer}_{level}_accumulate{ranks}")
        if not os.path.exists(theirs):
            run([*runs.worker, "--lib",
                 runs.library(optimizer, level, f"acc{ranks}"), "--out",
                 theirs, "--accumulate", str(ranks), "--overflow-at",
                 str(3 * ranks + 1)])
        ours_tensors, ours_meta = read_checkpoint(ours)
        theirs_tensors, theirs_meta = read_checkpoint(theirs)
        problems = different(ours_tensors, ours_meta, theirs_tensors,
                             theirs_meta)
        for rank in range(1, ranks):
            problems += [f"rank {rank}: {problem}" for problem in
                         different(*read_checkpoint(f"{ours}.rank{rank}"),
                                   ours_tensors, ours_meta)]
        # The scaler's state (and the gradient norm) after every step,
        # equal on every rank.
        trajectories = []
        for rank in range(ranks):
            with open(f"{ours}.scaler.rank{rank}") as trajectory:
                trajectories.append(trajectory.read().splitlines())
        if len(trajectories[0]) != 20 or any(
                t != trajectories[0] for t in trajectories):
            problems.append("the ranks' scaler states differ after some step")
        # And equal to one process's, the gradient norm bit for bit (which
        # clipping multiplies in: AdamW clips).
        with open(f"{theirs}.scaler.rank0") as trajectory:
            if trajectory.read().splitlines() != trajectories[0]:
                problems.append("the scaler or the gradient norm differs "
                                "from --accumulate's after some step")
        if ours_meta["skipped_steps"] != "1":
            problems.append(f"{ours_meta['skipped_steps']} steps skipped, "
                            "expected the overflowed one")
        if (optimizer, level, ranks, shard) == ("sgd", "O0", 2, ""):
            # A control: the --data-parallel build as one process (MPI's
            # singleton) ends elsewhere, so the comparison can fail.
            alone = ours + "_alone"
            run([*runs.worker, "--lib",
                 runs.library(optimizer, level, "dp"), "--out", alone,
                 "--ranks", "1"])
            if not different(*read_checkpoint(alone), ours_tensors,
                             ours_meta):
                problems.append("control: one process ends where 2 ranks "
                                "do, so the test cannot fail")
        if shard:
            # The slots shrink to a rank's shard; the control block stays
            # whole. With half copies (O2) the f32 master weights are
            # sharded too: they leave the params arena (the MLP reads none
            # in f32) for the rank's optimizer arena.
            runs.on_ranks(optimizer, level, ranks, "")
            whole, whole_params = runs.arena_bytes[(optimizer, level, ranks,
                                                    "")][0]
            masters = 4 * 203530 if level != "O0" else 0
            # A shard is whole chunks of the gradient statistics (800 of the
            # MLP's 203,530 parameters), so a rank may hold one more chunk
            # of each slot and of the masters (12 bytes a parameter at most
            # here).
            if len(arena) != ranks or max(
                    optimizer_bytes for optimizer_bytes, _ in
                    arena.values()) > (whole + masters) / ranks + 4096 + \
                    800 * 12:
                problems.append(f"optimizer arenas {arena} bytes, "
                                f"unsharded {whole}")
            if any(params_bytes > whole_params - masters
                   for _, params_bytes in arena.values()):
                problems.append(f"params arenas {arena} bytes, unsharded "
                                f"{whole_params}: the {masters} bytes of "
                                "master weights are still whole")
        label = f"{optimizer} {level}, {ranks} ranks{shard}"
        if problems:
            failures += 1
            print(f"FAIL: {label}: differs from --accumulate={ranks}: "
                  f"{', '.join(problems)}")
        else:
            held = (f"; optimizer arena {max(o for o, _ in arena.values())}"
                    f" and params arena {max(p for _, p in arena.values())} "
                    "bytes a rank" if arena else "")
            print(f"ok: {label}: every rank's {len(ours_tensors)} tensors "
                  f"and the scaler (scale {ours_meta['loss_scale']}, "
                  f"{ours_meta['skipped_steps']} skipped of "
                  f"{ours_meta['optimizer_steps']}) equal to "
                  f"--accumulate={ranks}, bit for bit; the scaler equal on "
                  f"every rank after each of the {len(trajectories[0])} "
                  f"steps{held}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--part", required=True, choices=PARTS,
                        help="which check to run (each ctest runs one)")
    parser.add_argument("--stage", choices=["all", "build", "test"],
                        default="all",
                        help="build: compile the part's libraries only (the "
                        "CMake build runs it); test: check with what it "
                        "built")
    parser.add_argument("--libraries",
                        help="where the part's libraries are (default: in "
                        "--work)")
    args = parser.parse_args()
    if args.stage != "all" and not args.libraries:
        parser.error("--stage=build and --stage=test need --libraries")
    args.libraries = Libraries(args, args.libraries or
                               os.path.join(args.work, "libraries"))
    if args.stage == "build":
        args.libraries.build_all()
        return
    if args.stage == "test":
        # What the build's record_status.sh kept of --stage=build.
        status = os.path.join(args.libraries.directory, "status")
        if not os.path.exists(status):
            sys.exit(f"FAIL: {args.libraries.directory} was not built (run "
                     "the build first)")
        if open(status).read().strip() != "0":
            log = open(os.path.join(args.libraries.directory, "log")).read()
            sys.exit(f"FAIL: the build's --stage=build failed:\n{log}")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    worker = [sys.executable, os.path.join(HERE, "dp_worker.py")]
    mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe",
              "--mca", "btl", "self,vader", "-np"]
    runs = Runs(args, mpirun, worker)
    part = args.part
    if part in PARTS[:3 * len(LEVELS)]:
        optimizer, level = part.split("_", 1)
        failures = check_matches_accumulation(runs, optimizer, level)
    elif part == "moves":
        failures = check_world_size_moves(
            args, mpirun, worker,
            lambda kind: runs.library("adam", "O2_f16", kind))
    elif part == "failing_rank":
        failures = check_failing_rank(
            args, mpirun, worker, runs.library("adamw", "O2_f16", "dp"))
    elif part == "gradients":
        output = run([*mpirun, "3", *worker, "--lib",
                      runs.library("sgd", "O0", "dp"), "--out",
                      os.path.join(args.work, "gradients"), "--gradients"])
        print(f"ok: {output.strip()}")
        output = run([*mpirun, "3", *worker, "--lib",
                      runs.library("sgd", "O0", "dp_shard"), "--out",
                      os.path.join(args.work, "gradients_sharded"),
                      "--gradients", "--sharded"])
        print(f"ok: sharded: {output.strip()}")
        failures = 0
    elif part == "state":
        failures = check_state_follows_rank0(args, mpirun, worker)
    elif part == "dropout":
        failures = check_dropout(args, mpirun, worker)
    elif part == "fp8_delayed":
        failures = check_fp8_delayed(args, mpirun, worker)
    elif part == "master_copies":
        failures = check_sharded_master_copies(args, mpirun, worker)
    elif part == "accumulate_on_ranks":
        failures = check_accumulate_on_ranks(args, mpirun, worker)
    elif part == "buckets":
        failures = check_bucket_size(
            args, mpirun, worker, runs.on_ranks("adam", "O2_f16", 3, ""))
    else:
        failures = check_torchrun(
            args, worker, runs, lambda name: os.path.join(args.work, name))
    if failures:
        sys.exit(f"FAIL: {failures} configuration(s)")
    print("PASS")


if __name__ == "__main__":
    main()
