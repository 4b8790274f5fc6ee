#!/usr/bin/python3
"""Static figures of one GPT-2-small training step, from `mpc compile --report`.

GPT-2 small as tools/bench/gpu_step.py builds it (12 layers, width 768, 12
heads, context 1024, vocabulary 50304, batch 8), compiled for the cuda
target (--arch=sm_90, AdamW) at O2 bf16, at O2 f16 with dynamic loss
scaling, and at O2 bf16 with the GELU recomputed in the backward pass
(--recompute=gelu: less activation memory, more bytes), with the moments in
bf16 (--optimizer-state=bf16), and with them and bf16 parameters updated by
stochastic rounding (--master-weights=none: no f32 master weights), and
with the classifier's logits whole (--classifier-chunks=1) rather than in
the chunks of rows the compiler chooses by default (and a sweep of chunk
counts, 1 to 16: bytes, bound and activation peak), and with its GEMMs on
FP8 operands (--fp8=all, and --fp8=auto: where the cost model says FP8
pays; with what each chose and why), each with current and with delayed
scaling (--fp8-scaling=delayed). The same for GPT-2 XL (48 layers,
width 1600, 25 heads, batch 4) at O2 bf16 and with FP8, and with the lean
training state (--optimizer-state=bf16 --master-weights=none) without and
with FP8. For
each it prints what `mpc compile --report=json` says of one
training step: kernel launches, GEMM calls, bytes moved, FLOPs, the
roofline bound on an H100 (the sum of each kernel's max(FLOPs / peak,
bytes / bandwidth)) and the compute floor (all FLOPs at the tensor-core
peak), the activation peak and the total memory. Nothing runs on a GPU: these
are the compiler's own accounting, the figures every change to code
generation quotes before and after. Last, the O2 bf16 step built with
--data-parallel on 8 ranks: its gradient buckets, the bytes they hold, and
the all-reduce the report models on NVLink and on 100 Gb/s InfiniBand,
with the part left exposed after the backward pass (also with buckets
capped at 1, 5 and 100 MiB instead of 25), and what
--shard-optimizer (ZeRO-1) leaves of the optimizer state on each rank and
the all-gather of the updated parameters it adds, beside the ring
reduce-scatter that sums its gradient buckets (half an all-reduce).

With --modelled, also the modelled time of the O2 bf16 step: the same
model built with --profile-emulated runs one step of its kernels' sampled
blocks under the block emulator (tools/bench/emulated_counters.py, about
35 s), and `--report --report-counters` prices each kernel from what was
counted (compiler/report/KernelModel.cpp states the model). It prints the
ideal bound, the modelled time, the kernel families by modelled time and
the ten kernels with the largest modelled / ideal ratio.

  /usr/bin/python3 tools/bench/gpt2_static.py [--build-dir=build] [--json]
      [--modelled]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_step import CONFIGS, REPO, gpt_mlir  # noqa: E402
from emulated_counters import modelled_step, print_modelled  # noqa: E402

VARIANTS = [("O2 bf16", ["--amp=O2", "--half=bf16"]),
            ("O2 f16 dynamic", ["--amp=O2", "--half=f16",
                                "--loss-scale=dynamic"]),
            ("O2 bf16 recomp", ["--amp=O2", "--half=bf16",
                                "--recompute=gelu"]),
            ("O2 bf16 state", ["--amp=O2", "--half=bf16",
                               "--optimizer-state=bf16"]),
            ("O2 bf16 lean", ["--amp=O2", "--half=bf16",
                              "--optimizer-state=bf16",
                              "--master-weights=none"]),
            ("O2 bf16 1 chunk", ["--amp=O2", "--half=bf16",
                                 "--classifier-chunks=1"]),
            ("O2 bf16 fp8 all", ["--amp=O2", "--half=bf16", "--fp8=all"]),
            ("O2 bf16 fp8 auto", ["--amp=O2", "--half=bf16", "--fp8=auto"]),
            ("O2 bf16 fp8 all delayed", ["--amp=O2", "--half=bf16",
                                         "--fp8=all", "--fp8-scaling=delayed"]),
            ("O2 bf16 fp8 auto delayed", ["--amp=O2", "--half=bf16",
                                          "--fp8=auto",
                                          "--fp8-scaling=delayed"])]

# GPT-2 XL's step with FP8 GEMMs, beside its bf16 step.
XL_VARIANTS = [("O2 bf16", ["--amp=O2", "--half=bf16"]),
               ("O2 bf16 fp8 all", ["--amp=O2", "--half=bf16", "--fp8=all"]),
               ("O2 bf16 fp8 auto", ["--amp=O2", "--half=bf16",
                                     "--fp8=auto"]),
               ("O2 bf16 fp8 all delayed", ["--amp=O2", "--half=bf16",
                                            "--fp8=all",
                                            "--fp8-scaling=delayed"]),
               ("O2 bf16 fp8 auto delayed", ["--amp=O2", "--half=bf16",
                                             "--fp8=auto",
                                             "--fp8-scaling=delayed"]),
               # The lean training state (bf16 moments, no f32 master
               # weights) without and with FP8.
               ("O2 bf16 lean", ["--amp=O2", "--half=bf16",
                                 "--optimizer-state=bf16",
                                 "--master-weights=none"]),
               ("O2 bf16 lean fp8 auto delayed",
                ["--amp=O2", "--half=bf16", "--optimizer-state=bf16",
                 "--master-weights=none", "--fp8=auto",
                 "--fp8-scaling=delayed"])]


BUCKET_MB_SWEEP = [1, 5, 100]

# --classifier-chunks at O2 bf16, beside the chunks the compiler chooses:
# what each count moves, bounds and keeps.
CLASSIFIER_CHUNKS_SWEEP = [1, 2, 4, 8, 16]


def report(mpc, model_path, flags):
    command = [mpc, "compile", model_path, "--target=cuda", "--arch=sm_90",
               "--optimizer=adamw", "--report=json", "--report-gpu=h100"]
    result = subprocess.run(command + flags, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"gpt2_static.py: {' '.join(command + flags)} failed:\n"
                 f"{result.stderr}")
    return json.loads(result.stdout)


def figures(data):
    step, gpu, memory = data["step"], data["gpu"], data["memory"]["chosen"]
    return {
        "launches": step["kernels"],
        "gemm_calls": step["gemm_calls"],
        "gbytes": step["bytes"] / 1e9,
        "tflop": step["flops"] / 1e12,
        "bound_ms": step["bound_seconds"] * 1e3,
        "floor_ms": step["flops"] / (gpu["half_tensor_tflops"] * 1e12) * 1e3,
        "activations_gb": memory["activations"] / 1e9,
        # Parameters (with state and half copies), gradients, optimizer
        # state: what training keeps beside the activations.
        "state_gb": (memory["parameters_state_and_half_copies"] +
                     memory["gradients"] +
                     memory["optimizer_state"]) / 1e9,
        "total_gb": memory["total"] / 1e9,
        "classifier_chunks": [(c["chunks"], c["chunk_rows"])
                              for c in data["classifier_chunks"]],
        # The same step with the classifier whole, where it is chunked.
        "whole_classifier": data["whole_classifier_step"] and {
            "gbytes": data["whole_classifier_step"]["bytes"] / 1e9,
            "bound_ms": data["whole_classifier_step"]["bound_seconds"] * 1e3,
            "activations_gb":
                data["whole_classifier_step"]["train_activations"] / 1e9},
        "fp8": fp8_figures(data["fp8"]),
    }


def fp8_figures(fp8):
    """What --fp8 chose: FP8 GEMMs of all, quantizing's bound, the bound
    without FP8, and the GEMMs left in half by reason."""
    if not fp8:
        return None
    reasons = {}
    for gemm in fp8["gemms"]:
        if not gemm["fp8"]:
            reason = gemm["reason"].split(":")[0]
            reasons[reason] = reasons.get(reason, 0) + 1
    return {"fp8_gemms": fp8["fp8_gemms"], "gemms": len(fp8["gemms"]),
            "quantize_ms": fp8["quantize_seconds"] * 1e3,
            "quantize_gb": fp8["quantize_bytes"] / 1e9,
            "bound_ms_without": fp8["bound_seconds_without_fp8"] * 1e3,
            "half_reasons": reasons}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--json", action="store_true",
                        help="print the figures as JSON")
    parser.add_argument("--modelled", action="store_true",
                        help="also the modelled time of the O2 bf16 step "
                             "(counts its kernels under the emulator)")
    args = parser.parse_args()
    modelled = None
    mpc = os.path.join(args.build_dir, "bin", "mpc")
    vocab, context, width, heads, layers, batch = CONFIGS["gpt2-small"]
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        model_path = os.path.join(workdir, "gpt2_small.mlir")
        with open(model_path, "w") as model:
            model.write(gpt_mlir("gpt2_small", vocab, context, width, heads,
                                 layers, batch))
        for name, flags in VARIANTS:
            results[name] = figures(report(mpc, model_path, flags))
        chunk_sweep = {
            chunks: figures(report(mpc, model_path,
                                   ["--amp=O2", "--half=bf16",
                                    f"--classifier-chunks={chunks}"]))
            for chunks in CLASSIFIER_CHUNKS_SWEEP}
        xl_path = os.path.join(workdir, "gpt2_xl.mlir")
        with open(xl_path, "w") as model:
            model.write(gpt_mlir("gpt2_xl", *CONFIGS["gpt2-xl"]))
        xl = {name: figures(report(mpc, xl_path, flags))
              for name, flags in XL_VARIANTS}
        parallel = report(mpc, model_path,
                          ["--amp=O2", "--half=bf16", "--data-parallel",
                           "--report-ranks=8"])["data_parallel"]
        # DDP's bucket_cap_mb trade-off: smaller buckets start earlier in
        # backward, each pays the ring's latency.
        sweep = {mb: report(mpc, model_path,
                            ["--amp=O2", "--half=bf16", "--data-parallel",
                             "--report-ranks=8", f"--bucket-mb={mb}"]
                            )["data_parallel"]
                 for mb in BUCKET_MB_SWEEP}
        sharded_plan = report(mpc, model_path,
                              ["--amp=O2", "--half=bf16", "--data-parallel",
                               "--shard-optimizer", "--report-ranks=8"]
                              )["data_parallel"]
        sharded = sharded_plan["shard_optimizer"]
        if args.modelled:
            modelled = modelled_step(
                args.build_dir, model_path, ["--amp=O2", "--half=bf16"],
                ["--optimizer=adamw"], workdir,
                lambda flags: report(mpc, model_path, flags))
    buckets = parallel["buckets"]
    dp = {
        "ranks": parallel["ranks"],
        "buckets": len(buckets),
        "gbytes_per_step": parallel["bytes_per_step"] / 1e9,
        "largest_bucket_mb": max(b["bytes"] for b in buckets) / 1e6,
        "links": {link["name"]: {"allreduce_ms": link["allreduce_seconds"] * 1e3,
                                 "exposed_ms": link["exposed_seconds"] * 1e3}
                  for link in parallel["links"]},
        "bucket_mb_sweep": {
            mb: {"buckets": len(plan["buckets"]),
                 "exposed_ms": {link["name"]: link["exposed_seconds"] * 1e3
                                for link in plan["links"]}}
            for mb, plan in sweep.items()},
        "shard_optimizer": {
            "bytes_per_parameter": sharded["bytes_per_parameter"],
            "bytes_per_parameter_sharded":
                sharded["bytes_per_parameter_sharded"],
            "optimizer_gb": sharded["optimizer_bytes"] / 1e9,
            "optimizer_gb_per_rank": sharded["optimizer_bytes_per_rank"] / 1e9,
            "gather_gb": sharded["gather_bytes"] / 1e9,
            "gather_ms": {link["name"]: seconds * 1e3 for link, seconds in
                          zip(parallel["links"], sharded["gather_seconds"])},
            # The buckets' collective of a sharded step: each rank needs
            # only its shard's sums.
            "collective": sharded_plan["collective"],
            "buckets_ms": {link["name"]: {
                "total_ms": link["allreduce_seconds"] * 1e3,
                "exposed_ms": link["exposed_seconds"] * 1e3}
                for link in sharded_plan["links"]},
        },
    }
    if args.json:
        extra = {"modelled": modelled} if modelled else {}
        print(json.dumps({**results, "data parallel": dp, "gpt2-xl": xl,
                          "classifier chunks": chunk_sweep, **extra},
                         indent=2))
        return
    print("GPT-2 small, batch 8 x 1024 tokens, AdamW, cuda sm_90, "
          "roofline on H100 SXM5:")
    print(f"{'variant':29} {'launches':>8} {'GEMMs':>6} {'GB moved':>9} "
          f"{'TFLOP':>6} {'bound ms':>9} {'floor ms':>9} {'act GB':>7} "
          f"{'state GB':>9} {'total GB':>9}")
    for name, f in results.items():
        print(f"{name:29} {f['launches']:8d} {f['gemm_calls']:6d} "
              f"{f['gbytes']:9.2f} {f['tflop']:6.2f} {f['bound_ms']:9.2f} "
              f"{f['floor_ms']:9.2f} {f['activations_gb']:7.2f} "
              f"{f['state_gb']:9.2f} {f['total_gb']:9.2f}")
    print("(state GB: parameters with their half copies, gradients and "
          "optimizer state)")
    chunks = ", ".join(f"{n} chunks of {rows} rows"
                       for n, rows in results["O2 bf16"]["classifier_chunks"])
    print(f"The classifier (lm-head GEMM, cross-entropy, the GEMMs of its "
          f"gradient) runs in {chunks or 'one piece'} by default")
    whole = results["O2 bf16"]["whole_classifier"]
    if whole:
        chunked = results["O2 bf16"]
        print(f"  against the classifier whole: "
              f"{chunked['gbytes'] - whole['gbytes']:+.2f} GB moved, "
              f"{chunked['bound_ms'] - whole['bound_ms']:+.2f} ms of bound, "
              f"{chunked['activations_gb'] - whole['activations_gb']:+.2f} "
              "GB of activation peak")
    print("  --classifier-chunks:", "; ".join(
        f"{chunks}: {f['launches']} launches, {f['gbytes']:.2f} GB, "
        f"{f['bound_ms']:.2f} ms, activations {f['activations_gb']:.2f} GB"
        for chunks, f in chunk_sweep.items()))
    print_fp8("GPT-2 small", results)
    print("\nGPT-2 XL (48 layers, width 1600, 25 heads), batch 4 x 1024 "
          "tokens, AdamW, cuda sm_90, roofline on H100 SXM5:")
    for name, f in xl.items():
        print(f"{name:29} {f['launches']:8d} {f['gemm_calls']:6d} "
              f"{f['gbytes']:9.2f} {f['tflop']:6.2f} {f['bound_ms']:9.2f} "
              f"{f['floor_ms']:9.2f} {f['activations_gb']:7.2f} "
              f"{f['state_gb']:9.2f} {f['total_gb']:9.2f}")
    print_fp8("GPT-2 XL", xl)
    print(f"\nO2 bf16 --data-parallel on {dp['ranks']} ranks: {dp['buckets']} "
          f"gradient buckets, {dp['gbytes_per_step']:.2f} GB of f32 "
          f"gradients per step (largest bucket {dp['largest_bucket_mb']:.1f} "
          f"MB); ring all-reduce modelled:")
    for name, link in dp["links"].items():
        print(f"  {name}: {link['allreduce_ms']:.2f} ms in all, "
              f"{link['exposed_ms']:.2f} ms exposed after backward")
    for mb, plan in dp["bucket_mb_sweep"].items():
        exposed = ", ".join(f"{name.split(' (')[0]} {ms:.2f} ms"
                            for name, ms in plan["exposed_ms"].items())
        print(f"  --bucket-mb={mb}: {plan['buckets']} buckets, exposed "
              f"{exposed}")
    shard = dp["shard_optimizer"]
    print(f"With --shard-optimizer: {shard['bytes_per_parameter']} bytes of "
          f"optimizer state per parameter become "
          f"{shard['bytes_per_parameter_sharded']:.2f} on each rank, "
          f"{shard['optimizer_gb_per_rank']:.3f} GB instead of "
          f"{shard['optimizer_gb']:.3f} GB; the updated parameters "
          f"({shard['gather_gb']:.2f} GB with their half copies) are "
          f"gathered after every step, and the gradient buckets are "
          f"summed by a ring {shard['collective']}:")
    for name, ms in shard["gather_ms"].items():
        buckets = shard["buckets_ms"][name]
        print(f"  {name}: {shard['collective']} {buckets['total_ms']:.2f} ms "
              f"({buckets['exposed_ms']:.2f} ms exposed after backward), "
              f"all-gather {ms:.2f} ms")
    if modelled:
        print("\nO2 bf16, ", end="")
        print_modelled(modelled)


def print_fp8(model, results):
    """What --fp8=all and --fp8=auto chose for `model`, and why."""
    for name in ("O2 bf16 fp8 all", "O2 bf16 fp8 auto",
                 "O2 bf16 fp8 all delayed", "O2 bf16 fp8 auto delayed"):
        fp8 = results[name]["fp8"]
        half = "; ".join(f"{count} {reason}"
                         for reason, count in fp8["half_reasons"].items())
        print(f"{model} {name}: {fp8['fp8_gemms']} of {fp8['gemms']} GEMMs "
              f"in FP8, quantizing {fp8['quantize_gb']:.2f} GB "
              f"({fp8['quantize_ms']:.2f} ms of the bound); bound "
              f"{results[name]['bound_ms']:.2f} ms against "
              f"{fp8['bound_ms_without']:.2f} ms without FP8"
              + (f"; in half: {half}" if half else ""))


if __name__ == "__main__":
    main()
