#!/usr/bin/python3
"""Each kernel family's memory requests, counted by the block emulator.

Compiles a model with `mpc compile --profile-emulated --shared` (the cpu
target running every kernel with the cuda target's blocks, each load and
store instrumented), trains it for --steps steps on made-up inputs in a
child process with MPC_EMULATION_COUNTERS set, and prints what the
emulator counted, grouped by kernel family (the kernel's name without the
model's prefix and number), as Nsight Compute would name it:

  requests   global load and store instructions, per warp
  sect/req   32-byte sectors per request (4 for coalesced f32, 2 for bf16)
  eff        sector efficiency: the fewest sectors the requested bytes need
             over the sectors touched (100 % is perfectly coalesced)
  L1 MB      sectors x 32 bytes: what the SMs ask of L1 (an upper bound of
             the traffic to L2: a sector L1 still holds costs L2 nothing)
  uniq MB    distinct sectors x 32: the DRAM traffic if L2 kept all reuse
  wav/req    shared-memory wavefronts per request; conflicts = wavefronts
             beyond the fewest the request needs, as a share of all
  shfl       warp shuffles (__shfl_*_sync), counted once a warp
  lanes      the lanes active in a warp instruction on average, over the
             memory requests, shuffles, votes, __syncwarp and __syncthreads
             (Nsight Compute's threads per instruction; 32: no divergence)

Counts are scaled from the sampled blocks to whole grids and summed over
the launches of --steps steps. GEMMs run on the host's BLAS-like kernel
and are not counted (cuBLASLt's on the GPU); mma.sync collectives count as
products, not as the loops that emulate them.

  /usr/bin/python3 tools/bench/emulated_counters.py [--config=gpt2-layer]
      [--model=M.mlir] [--build-dir=build] [--amp=O2] [--half=bf16]
      [--steps=1] [--sample-only] [--json] [--save=counters.json]

`mpc compile M.mlir --target=cuda --report --report-counters=counters.json`
then prices each kernel from them (a modelled time beside the roofline
bound); tools/bench/gpt2_static.py --modelled does both for GPT-2 small.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_step import REPO, gpt_mlir  # noqa: E402

# name: (vocab, context, width, heads, layers, batch). gpt2-layer is one
# GPT-2-small layer (width 768, 12 heads of 64, the 50304-word classifier)
# on 2 x 128 tokens: GPT-2 small's kernels at a size the cpu emulates in
# seconds.
CONFIGS = {
    "example": (64, 16, 32, 2, 2, 4),
    "gpt2-layer": (50304, 128, 768, 12, 1, 2),
    "gpt2-small": (50304, 1024, 768, 12, 12, 8),
}
# Too large to emulate whole: only the counted blocks run, and the GEMMs
# are skipped (MPC_EMULATION_SAMPLE_ONLY).
SAMPLED = {"gpt2-small"}

# Trains the model in a process of its own, so that its counters are
# written when it exits. Integer inputs are drawn below a bound that is
# halved until the model accepts it (labels and token ids have one).
TRAIN = r"""
import sys
import numpy as np
import mpc
model = mpc.load(sys.argv[1])
steps = int(sys.argv[2])
rng = np.random.default_rng(0)
bound = 1 << 15
with model.session(seed=1) as session:
    for step in range(steps):
        while True:
            arrays = []
            for info in model.inputs:
                if np.issubdtype(info.numpy_dtype, np.integer):
                    arrays.append(rng.integers(0, bound, info.shape)
                                  .astype(info.numpy_dtype))
                else:
                    arrays.append(rng.uniform(-1, 1, info.shape)
                                  .astype(info.numpy_dtype))
            try:
                loss = session.train_step(*arrays)
                break
            except mpc.MpcError as error:
                if error.status != "MPC_ERROR_OUT_OF_RANGE" or bound == 1:
                    raise
                bound //= 2
        print(f"step {step} loss {loss:.4f}", file=sys.stderr)
"""


def family(kernel):
    """gpt_k12_layer_norm_grad_input -> layer_norm_grad_input."""
    match = re.match(r"^.*?_k\d+_(.*)$", kernel)
    return match.group(1) if match else kernel


def count_model(build_dir, model_path, flags, workdir, steps=1,
                sample_only=False):
    """Builds `model_path` with --profile-emulated and `flags`, trains it
    `steps` steps under the emulator, and returns the counters' JSON."""
    mpc = os.path.join(build_dir, "bin", "mpc")
    outdir = os.path.join(workdir, "counted")
    command = [mpc, "compile", model_path, "--profile-emulated", "--shared",
               "-o", outdir] + flags
    compiled = subprocess.run(command, capture_output=True, text=True)
    if compiled.returncode != 0:
        sys.exit(f"emulated_counters.py: {' '.join(command)} failed:\n"
                 f"{compiled.stderr}")
    library = [f for f in os.listdir(outdir) if f.endswith(".so")][0]
    counters = os.path.join(workdir, "counters.json")
    # The emulator's thread-local state (its coordinates, each kernel's
    # shared arrays) is static TLS, which a library loaded with dlopen
    # gets only from glibc's reserve: make the reserve large enough.
    env = dict(os.environ, MPC_EMULATION_COUNTERS=counters, MPC_THREADS="1",
               PYTHONPATH=os.path.join(build_dir, "python"),
               GLIBC_TUNABLES="glibc.rtld.optional_static_tls=16777216")
    if sample_only:
        env["MPC_EMULATION_SAMPLE_ONLY"] = "1"
    trained = subprocess.run(
        [sys.executable, "-c", TRAIN, os.path.join(outdir, library),
         str(steps)], env=env, capture_output=True, text=True)
    if trained.returncode != 0:
        sys.exit(f"emulated_counters.py: training failed:\n{trained.stderr}")
    with open(counters) as f:
        return json.load(f)


def model_flags(args):
    flags = [f"--amp={args.amp}", f"--optimizer={args.optimizer}"]
    if args.amp != "O0":
        flags.append(f"--half={args.half}")
    return flags


def count(args, workdir):
    if args.model:
        model_path = args.model
    else:
        model_path = os.path.join(workdir, "model.mlir")
        with open(model_path, "w") as out:
            out.write(gpt_mlir("counted", *CONFIGS[args.config]))
    sample_only = args.sample_only or (not args.model
                                       and args.config in SAMPLED)
    return count_model(args.build_dir, model_path, model_flags(args),
                       workdir, args.steps, sample_only)


def modelled_step(build_dir, model_path, flags, train_flags, workdir, report):
    """Counts the step of `model_path` built with `flags` + `train_flags`
    (sampled blocks), then calls `report(flags)`, which must return `mpc
    compile --report=json`'s object for the same model, with
    --report-counters added to the flags; summarises its modelled time."""
    counters = count_model(build_dir, model_path, flags + train_flags,
                           workdir, sample_only=True)
    counters_path = os.path.join(workdir, "counters.json")
    with open(counters_path, "w") as out:
        json.dump(counters, out)
    data = report(flags + [f"--report-counters={counters_path}"])
    step = data["step"]
    families = {}
    for kernel in data["kernels"]:
        name = "GEMM (cuBLASLt)" if kernel["kind"] == "gemm" else \
            family(kernel["name"])
        entry = families.setdefault(name, {"launches": 0, "bound_ms": 0.0,
                                           "modelled_ms": 0.0,
                                           "limited_by": {}})
        entry["launches"] += 1
        entry["bound_ms"] += kernel["bound_seconds"] * 1e3
        entry["modelled_ms"] += kernel["modelled_seconds"] * 1e3
        limit = kernel["limited_by"]
        entry["limited_by"][limit] = entry["limited_by"].get(limit, 0) + 1
    worst = sorted((k for k in data["kernels"] if k["bound_seconds"] > 0),
                   key=lambda k: -k["modelled_seconds"] / k["bound_seconds"])
    return {
        "bound_ms": step["bound_seconds"] * 1e3,
        "modelled_ms": step["modelled_seconds"] * 1e3,
        "counted_kernels": step["counted_kernels"],
        "families": families,
        "largest_ratio": [
            {"kernel": k["name"], "bound_us": k["bound_seconds"] * 1e6,
             "modelled_us": k["modelled_seconds"] * 1e6,
             "ratio": k["modelled_seconds"] / k["bound_seconds"],
             "limited_by": k["limited_by"]} for k in worst[:10]],
    }


def print_modelled(m):
    print(f"modelled from the block emulator's counters: ideal bound "
          f"{m['bound_ms']:.2f} ms, modelled {m['modelled_ms']:.2f} ms "
          f"({m['modelled_ms'] / m['bound_ms']:.2f}x; "
          f"{m['counted_kernels']} kernels counted)")
    print(f"{'family':28} {'launches':>8} {'bound ms':>9} {'modelled ms':>12}"
          f"  limited by")
    for name, f in sorted(m["families"].items(),
                          key=lambda kv: -kv[1]["modelled_ms"]):
        limits = ", ".join(f"{k} {v}" for k, v in f["limited_by"].items())
        print(f"{name:28} {f['launches']:8d} {f['bound_ms']:9.3f} "
              f"{f['modelled_ms']:12.3f}  {limits}")
    print("ten kernels with the largest modelled / ideal ratio:")
    for k in m["largest_ratio"]:
        print(f"  {k['kernel']:40} {k['bound_us']:10.2f} us "
              f"{k['modelled_us']:10.2f} us {k['ratio']:8.1f}x  "
              f"{k['limited_by']}")


def families(data):
    rows = {}
    for kernel in data["kernels"]:
        row = rows.setdefault(family(kernel["kernel"]), {
            "launches": 0, "requests": 0, "sectors": 0, "ideal_sectors": 0,
            "distinct_sectors": 0, "shared_requests": 0, "wavefronts": 0,
            "ideal_wavefronts": 0, "mma_products": 0,
            "load_requests": 0, "load_sectors": 0,
            "store_requests": 0, "store_sectors": 0, "shuffles": 0,
            "instructions": 0, "lanes": 0})
        row["launches"] += kernel["launches"]
        for kind in ("global_load", "global_store", "global_atomic"):
            g = kernel[kind]
            row["requests"] += g["requests"]
            row["sectors"] += g["sectors"]
            row["ideal_sectors"] += g["ideal_sectors"]
        row["load_requests"] += kernel["global_load"]["requests"]
        row["load_sectors"] += kernel["global_load"]["sectors"]
        row["store_requests"] += kernel["global_store"]["requests"]
        row["store_sectors"] += kernel["global_store"]["sectors"]
        row["distinct_sectors"] += kernel["distinct_sectors"]
        for kind in ("shared_load", "shared_store"):
            s = kernel[kind]
            row["shared_requests"] += s["requests"]
            row["wavefronts"] += s["wavefronts"]
            row["ideal_wavefronts"] += s["ideal_wavefronts"]
        for kind in ("global_load", "global_store", "global_atomic",
                     "shared_load", "shared_store"):
            row["instructions"] += kernel[kind]["requests"]
            row["lanes"] += kernel[kind].get("lanes", 0)
        # Counters written before the warp-wide classes were counted lack
        # them.
        for kind in ("shuffle", "vote", "warp_sync", "barrier"):
            counted = kernel.get(kind, {})
            row["instructions"] += counted.get("instructions", 0)
            row["lanes"] += counted.get("lanes", 0)
        row["shuffles"] += kernel.get("shuffle", {}).get("instructions", 0)
        row["mma_products"] += kernel.get("mma_products", 0)
    return rows


def ratio(a, b):
    return a / b if b else 0.0


def print_table(rows):
    print(f"{'family':<28} {'launch':>6} {'requests':>9} {'ld s/r':>6} "
          f"{'st s/r':>6} {'eff':>5} {'L1 MB':>8} {'uniq MB':>8} "
          f"{'wav/req':>7} {'confl':>6} {'shfl':>9} {'lanes':>5}")
    total = {"sectors": 0, "ideal": 0, "distinct": 0}
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["sectors"]):
        conflicts = ratio(r["wavefronts"] - r["ideal_wavefronts"],
                          r["wavefronts"])
        print(f"{name:<28} {r['launches']:>6} {r['requests']:>9} "
              f"{ratio(r['load_sectors'], r['load_requests']):>6.1f} "
              f"{ratio(r['store_sectors'], r['store_requests']):>6.1f} "
              f"{100 * ratio(r['ideal_sectors'], r['sectors']):>4.0f}% "
              f"{r['sectors'] * 32 / 1e6:>8.2f} "
              f"{r['distinct_sectors'] * 32 / 1e6:>8.2f} "
              f"{ratio(r['wavefronts'], r['shared_requests']):>7.2f} "
              f"{100 * conflicts:>5.0f}% {r['shuffles']:>9} "
              f"{ratio(r['lanes'], r['instructions']):>5.1f}")
        total["sectors"] += r["sectors"]
        total["ideal"] += r["ideal_sectors"]
        total["distinct"] += r["distinct_sectors"]
    print(f"all: L1 {total['sectors'] * 32 / 1e6:.2f} MB, sector efficiency "
          f"{100 * ratio(total['ideal'], total['sectors']):.1f} %, distinct "
          f"{total['distinct'] * 32 / 1e6:.2f} MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--config", choices=sorted(CONFIGS),
                        default="gpt2-layer")
    parser.add_argument("--model", help="an .mlir model instead of --config")
    parser.add_argument("--amp", default="O2")
    parser.add_argument("--half", default="bf16")
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--sample-only", action="store_true",
                        help="run only the counted blocks, skip the GEMMs "
                             "(always for gpt2-small)")
    parser.add_argument("--json", action="store_true",
                        help="print the emulator's counters as they are")
    parser.add_argument("--save", metavar="FILE",
                        help="also write them to FILE, for mpc compile "
                             "--report --report-counters=FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        data = count(args, workdir)
    if args.save:
        with open(args.save, "w") as out:
            json.dump(data, out, indent=1)
    if args.json:
        print(json.dumps(data, indent=1))
        return
    what = args.model or f"{args.config} {CONFIGS[args.config]}"
    print(f"{what}, --amp={args.amp} --half={args.half} "
          f"--optimizer={args.optimizer}, {args.steps} step(s)")
    print_table(families(data))


if __name__ == "__main__":
    main()
