#!/usr/bin/env python3
"""Trains one model on the cpu and on the cuda target, compares the results.

  compare_targets.py --rtol 1e-2 --atol 1e-3 --steps 20 \
      --reference <cpu train_steps> --candidate <cuda train_steps> \
      [--candidate-arg=--cuda-graphs] [--graphs-bit-for-bit]

Both programs (tests/cuda/train_steps.cpp) train the same model from the same
seed on the same inputs, evaluate it and save a checkpoint. The test fails
unless every step's and evaluation's loss and every tensor of the two checkpoints (parameters, state,
optimizer state) agree within |cuda - cpu| <= atol + rtol * |cpu| (per
element; for tensors rtol, or --tensor-rtol, scales with the tensor's
largest magnitude), and
the checkpoints have the same tensors, dtypes, shapes and metadata: one
format on both targets. With --graphs-bit-for-bit the candidate also trains
as CUDA graphs, which must give every loss and the checkpoint, bit for bit,
that its kernel-by-kernel launches give (a graph replays its captured
arguments: anything that changes between steps must come from device
memory). Exits 77 (ctest's skip code) when the candidate
reports that there is no CUDA device.
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

SKIP = 77


def run(program, steps, checkpoint, extra_args):
    result = subprocess.run([program, f"--steps={steps}",
                             f"--checkpoint={checkpoint}"] + extra_args,
                            capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def losses(output, kind):
    return [float(v) for v in re.findall(rf"^{kind} \d+ loss (\S+)$", output,
                                         re.MULTILINE)]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = body[begin:end]
        dtype = entry["dtype"]
        if dtype == "F32":
            values = struct.unpack(f"<{len(raw) // 4}f", raw)
        elif dtype == "F16":
            values = struct.unpack(f"<{len(raw) // 2}e", raw)
        elif dtype == "BF16":
            halves = struct.unpack(f"<{len(raw) // 2}H", raw)
            values = [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                      for h in halves]
        else:
            sys.exit(f"error: {path}: tensor {name} has dtype {dtype}")
        tensors[name] = (dtype, entry["shape"], values)
    return metadata, tensors


def graphs_differ(args, launches_out, launches_ckpt, graphs_ckpt):
    """The candidate again, as CUDA graphs: how its losses and checkpoint
    differ from the kernel-by-kernel run's (nothing, or failures)."""
    status, graphs_out = run(args.candidate, args.steps, graphs_ckpt,
                             args.candidate_arg + ["--cuda-graphs"])
    if status != 0:
        sys.exit(f"error: {args.candidate} --cuda-graphs exited {status}:\n"
                 f"{graphs_out}")
    failures = []
    for kind in ("step", "eval"):
        if losses(graphs_out, kind) != losses(launches_out, kind):
            failures.append(f"graphs: the {kind} losses differ from the "
                            f"launches': {losses(graphs_out, kind)} vs "
                            f"{losses(launches_out, kind)}")
    graphs_meta, graphs_tensors = read_safetensors(graphs_ckpt)
    launches_meta, launches_tensors = read_safetensors(launches_ckpt)
    if graphs_meta != launches_meta:
        failures.append(f"graphs: metadata {graphs_meta}, launches "
                        f"{launches_meta}")
    for name in sorted(set(graphs_tensors) | set(launches_tensors)):
        got, want = graphs_tensors.get(name), launches_tensors.get(name)
        same = got is not None and want is not None and got[:2] == want[:2] \
            and all(g == w or (g != g and w != w)
                    for g, w in zip(got[2], want[2]))
        if not same:
            failures.append(f"graphs: {name} differs from the launches'")
    if not failures:
        print(f"graphs: {args.steps} steps' losses and "
              f"{len(graphs_tensors)} tensors bit for bit the launches'")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--atol", type=float, required=True)
    parser.add_argument("--tensor-rtol", type=float,
                        help="rtol of the checkpoints' tensors, relative to "
                             "each one's largest value (default: --rtol)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--candidate-arg", action="append", default=[],
                        help="an argument for the candidate program")
    parser.add_argument("--graphs-bit-for-bit", action="store_true",
                        help="also run the candidate with --cuda-graphs and "
                             "require its launches' bits")
    args = parser.parse_args()
    tensor_rtol = args.rtol if args.tensor_rtol is None else args.tensor_rtol

    with tempfile.TemporaryDirectory() as tmp:
        cpu_ckpt = os.path.join(tmp, "cpu.safetensors")
        cuda_ckpt = os.path.join(tmp, "cuda.safetensors")
        status, cuda_out = run(args.candidate, args.steps, cuda_ckpt,
                               args.candidate_arg)
        if status == SKIP:
            print(cuda_out.strip())
            return SKIP
        if status != 0:
            sys.exit(f"error: {args.candidate} exited {status}:\n{cuda_out}")
        status, cpu_out = run(args.reference, args.steps, cpu_ckpt, [])
        if status != 0:
            sys.exit(f"error: {args.reference} exited {status}:\n{cpu_out}")

        failures = []
        if args.graphs_bit_for_bit:
            failures += graphs_differ(args, cuda_out, cuda_ckpt,
                                      os.path.join(tmp, "graphs.safetensors"))
        worst_loss = 0.0  # the largest |cuda - cpu| / |cpu| of a loss
        for kind, count in (("step", args.steps), ("eval", 3)):
            cpu_losses, cuda_losses = losses(cpu_out, kind), losses(cuda_out,
                                                                    kind)
            if len(cpu_losses) != count or len(cuda_losses) != count:
                sys.exit(f"error: expected {count} {kind} losses, got "
                         f"{len(cpu_losses)} (reference) and "
                         f"{len(cuda_losses)} (candidate)")
            for n, (a, b) in enumerate(zip(cpu_losses, cuda_losses)):
                worst_loss = max(worst_loss, abs(b - a) / max(abs(a), 1e-30))
                if not abs(b - a) <= args.atol + args.rtol * abs(a):
                    failures.append(f"{kind} {n}: loss {b} on cuda, {a} on "
                                    f"cpu")
        cpu_losses, cuda_losses = losses(cpu_out, "step"), losses(cuda_out,
                                                                  "step")

        cpu_meta, cpu_tensors = read_safetensors(cpu_ckpt)
        cuda_meta, cuda_tensors = read_safetensors(cuda_ckpt)
        # The checksums follow the tensors, which agree only within the
        # tolerance: the same keys, not the same values.
        def without_checksums(meta):
            return {k: ("crc32" if k.startswith("crc32:") else v)
                    for k, v in meta.items()}
        if without_checksums(cpu_meta) != without_checksums(cuda_meta):
            failures.append(f"metadata differ: {cuda_meta} vs {cpu_meta}")
        if sorted(cpu_tensors) != sorted(cuda_tensors):
            failures.append("the checkpoints hold different tensors")
        identical = 0
        worst_tensor = (0.0, "")  # |cuda - cpu| / largest |cpu|, and where
        for name in sorted(set(cpu_tensors) & set(cuda_tensors)):
            dtype, shape, ref = cpu_tensors[name]
            cuda_dtype, cuda_shape, got = cuda_tensors[name]
            if (dtype, shape) != (cuda_dtype, cuda_shape):
                failures.append(f"{name}: {cuda_dtype}{cuda_shape} on cuda, "
                                f"{dtype}{shape} on cpu")
                continue
            scale = max((abs(v) for v in ref), default=0.0)
            worst = max((abs(g - r) for g, r in zip(got, ref)), default=0.0)
            identical += all(g == r or (g != g and r != r)
                             for g, r in zip(got, ref))
            worst_tensor = max(worst_tensor, (worst / max(scale, 1e-30),
                                              name))
            if not worst <= args.atol + tensor_rtol * scale:
                failures.append(f"{name}: max |cuda - cpu| = {worst:.3g}, "
                                f"largest |cpu| = {scale:.3g}")
        if failures:
            print("\n".join(failures))
            return 1
        print(f"{args.steps} steps: losses and {len(cpu_tensors)} tensors "
              f"agree (rtol {args.rtol}, atol {args.atol}, tensors' rtol "
              f"{tensor_rtol}); last loss "
              f"{cuda_losses[-1]} on cuda, {cpu_losses[-1]} on cpu")
        print(f"largest relative difference: {worst_loss:.3g} in a loss, "
              f"{worst_tensor[0]:.3g} in a tensor ({worst_tensor[1] or '-'}, "
              f"relative to its largest value); {identical} of "
              f"{len(cpu_tensors)} tensors bit-identical")
        return 0


if __name__ == "__main__":
    sys.exit(main())
