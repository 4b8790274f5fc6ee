#!/usr/bin/python3
"""Static figures of one ResNet-50 training step, from `mpc compile --report`.

torchvision's ResNet-50 (untrained, 1000 classes) with a cross-entropy loss,
exported by torch.onnx.export in training mode (opset 15) at batch 32 of
224x224 images, imported with `mpc import`, and compiled for the cuda target
(--arch=sm_90) at O2 bf16 with SGD and momentum 0.9. It prints what
`mpc compile --report=json` says of one training step: kernel launches,
GEMM calls (and those of convolutions per convolution), bytes moved, FLOPs, the roofline bound on
an H100 (the sum of each kernel's max(FLOPs / peak, bytes / bandwidth)) and
the compute floor (all FLOPs at the tensor-core peak), the activation peak
and the total memory; then the kernel families that bound the step most.
Nothing runs on a GPU: these are the compiler's own accounting, the figures
every change to convolutions quotes before and after, beside
tools/bench/gpt2_static.py's.

With --modelled, also the step's modelled time: the imported model built
with --profile-emulated runs one step of its kernels' sampled blocks under
the block emulator, and `--report --report-counters` prices each kernel
from what was counted (tools/bench/emulated_counters.py).

  /usr/bin/python3 tools/bench/resnet50_static.py [--build-dir=build] [--json]
      [--modelled]

Needs Debian's python3-torch and python3-torchvision (tools/setup.sh does
not install them: `apt-get install -y python3-torch python3-torchvision`).
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulated_counters import modelled_step, print_modelled  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH, IMAGE = 32, 224
FLAGS = ["--amp=O2", "--half=bf16", "--optimizer=sgd", "--momentum=0.9"]


def export(onnx_path):
    import torch
    import torch.nn.functional as F
    import torchvision

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torchvision.models.resnet50()

        def forward(self, images, labels):
            return F.cross_entropy(self.net(images), labels)

    torch.manual_seed(0)
    module = WithLoss().train()
    images = torch.randn(BATCH, 3, IMAGE, IMAGE)
    labels = torch.randint(0, 1000, (BATCH,))
    torch.onnx.export(module, (images, labels), onnx_path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      input_names=["images", "labels"],
                      output_names=["loss"], opset_version=15)
    return sum(isinstance(m, torch.nn.Conv2d) for m in module.modules())


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"resnet50_static.py: {' '.join(command)} failed:\n"
                 f"{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--json", action="store_true",
                        help="print the figures as JSON")
    parser.add_argument("--modelled", action="store_true",
                        help="also the step's modelled time (counts its "
                             "kernels under the block emulator)")
    parser.add_argument("--mpc-flag", action="append", default=[],
                        metavar="FLAG",
                        help="another `mpc compile` flag, e.g. "
                             "--mpc-flag=--master-weights=none (repeatable)")
    args = parser.parse_args()
    flags = FLAGS + args.mpc_flag
    modelled = None
    mpc = os.path.join(args.build_dir, "bin", "mpc")
    with tempfile.TemporaryDirectory() as workdir:
        onnx_path = os.path.join(workdir, "resnet50.onnx")
        model_path = os.path.join(workdir, "resnet50.mlir")
        convolutions = export(onnx_path)
        run([mpc, "import", onnx_path, "-o", model_path])
        def report(flags):
            return json.loads(run([mpc, "compile", model_path,
                                   "--target=cuda", "--arch=sm_90",
                                   "--report=json", "--report-gpu=h100"]
                                  + flags))
        data = report(flags)
        if args.modelled:
            modelled = modelled_step(args.build_dir, model_path, flags, [],
                                     workdir, report)
    step, gpu, memory = data["step"], data["gpu"], data["memory"]["chosen"]
    # GEMM calls made for convolutions and their gradients.
    conv_gemms = sum(1 for kernel in data["kernels"]
                     if kernel["kind"] == "gemm" and
                     any(op["op"].startswith("mpc.conv2d")
                         for op in kernel["ops"]))
    families = collections.defaultdict(lambda: [0, 0, 0.0])
    for kernel in data["kernels"]:
        family = families[re.sub(r"^resnet50_k\d+_", "", kernel["name"])]
        family[0] += 1
        family[1] += kernel["bytes"]
        family[2] += kernel["bound_seconds"]
    figures = {
        "launches": step["kernels"],
        "gemm_calls": step["gemm_calls"],
        "convolutions": convolutions,
        "gemms_per_convolution": conv_gemms / convolutions,
        "gbytes": step["bytes"] / 1e9,
        "tflop": step["flops"] / 1e12,
        "bound_ms": step["bound_seconds"] * 1e3,
        "floor_ms": step["flops"] / (gpu["half_tensor_tflops"] * 1e12) * 1e3,
        "activations_gb": memory["activations"] / 1e9,
        "total_gb": memory["total"] / 1e9,
        "families": {name: {"launches": count, "gbytes": moved / 1e9,
                            "bound_ms": seconds * 1e3}
                     for name, (count, moved, seconds) in
                     sorted(families.items(), key=lambda item: -item[1][2])},
    }
    if modelled:
        figures["modelled"] = modelled
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    f = figures
    print(f"torchvision ResNet-50, batch {BATCH} x {IMAGE}x{IMAGE}, O2 bf16, "
          "SGD momentum 0.9, cuda sm_90, roofline on H100 SXM5:")
    print(f"{'launches':>8} {'GEMMs':>6} {'GEMMs/conv':>10} {'GB moved':>9} "
          f"{'TFLOP':>6} {'bound ms':>9} {'floor ms':>9} {'act GB':>7} "
          f"{'total GB':>9}")
    print(f"{f['launches']:8d} {f['gemm_calls']:6d} "
          f"{f['gemms_per_convolution']:10.2f} {f['gbytes']:9.2f} "
          f"{f['tflop']:6.2f} {f['bound_ms']:9.2f} {f['floor_ms']:9.2f} "
          f"{f['activations_gb']:7.2f} {f['total_gb']:9.2f}")
    print("\nKernel families by their share of the bound:")
    print(f"{'family':32} {'launches':>8} {'GB moved':>9} {'bound ms':>9}")
    for name, family in list(f["families"].items())[:12]:
        print(f"{name:32} {family['launches']:8d} {family['gbytes']:9.2f} "
              f"{family['bound_ms']:9.3f}")
    if modelled:
        print()
        print_modelled(modelled)


if __name__ == "__main__":
    main()
