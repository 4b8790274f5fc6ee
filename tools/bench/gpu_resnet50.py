#!/usr/bin/python3
"""Time ResNet-50 training steps on a GPU: mpc's cuda target against PyTorch.

torchvision's ResNet-50 with a cross-entropy loss at batch 32 of 224x224
images, O2 bf16, SGD with momentum 0.9 (tools/bench/resnet50_static.py's
model and flags, whose static figures this measures):

  mpc               exported by torch.onnx.export, `mpc import`ed, compiled
                    with `mpc compile --target=cuda --arch=<this GPU>`,
                    linked with tests/cuda/train_steps.cpp and timed with
                    --bench: the median wall time of mpc_train_step over N
                    steps on one batch after W untimed ones (each step ends
                    with its loss on the host);
  mpc graphs        the same with --cuda-graphs;
  torch AMP         torch.autocast(bf16), NCHW;
  torch AMP NHWC    the same in channels-last memory format (what NVIDIA's
                    recipes use on tensor cores);

and prints ms/step, images/s, peak memory and the ratio of each time to
mpc's. Run by hand:

  /usr/bin/python3 tools/bench/gpu_resnet50.py [--build-dir=build]
      [--steps=30] [--warmup=10]

or, where the GPU machine has no MLIR toolchain, in two halves as
tools/bench/gpu_step.py does:

  gpu_resnet50.py --build-only=DIR --arch=sm_90   (here: torch, mpc, c++)
  gpu_resnet50.py --prebuilt=DIR                   (there: the GPU)

"""

import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_step  # noqa: E402
import resnet50_static  # noqa: E402

BATCH, IMAGE = resnet50_static.BATCH, resnet50_static.IMAGE


def build_mpc(args, arch, workdir):
    """Exports, imports, compiles and links the timing program; its path."""
    onnx_path = os.path.join(workdir, "resnet50.onnx")
    model_path = os.path.join(workdir, "resnet50.mlir")
    resnet50_static.export(onnx_path)
    mpc = os.path.join(args.build_dir, "bin", "mpc")
    subprocess.run([mpc, "import", onnx_path, "-o", model_path], check=True)
    out = os.path.join(workdir, "resnet50")
    subprocess.run([mpc, "compile", model_path, "--target=cuda",
                    f"--arch={arch}", *resnet50_static.FLAGS, "-o", out],
                   check=True)
    program = os.path.join(out, "bench")
    subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-O2",
                    f"-I{REPO}", f"-I{out}", "-DMPC_MODEL=resnet50",
                    "-DMPC_TARGET_UNDER_TEST=MPC_TARGET_CUDA",
                    os.path.join(REPO, "tests", "cuda", "train_steps.cpp"),
                    os.path.join(out, "libresnet50.a"),
                    os.path.join(args.build_dir, "lib", "libmpcrt.a"),
                    "-lz", "-ldl", "-o", program], check=True)
    return program


def time_torch(args, channels_last):
    import torch
    import torch.nn.functional as F
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().train()
    memory_format = (torch.channels_last if channels_last
                     else torch.contiguous_format)
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(BATCH, 3, IMAGE, IMAGE, device="cuda").to(
        memory_format=memory_format)
    labels = torch.randint(0, 1000, (BATCH,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss.item()  # ends the step on the host, as mpc's does

    return gpu_step.time_torch_steps(args, step)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    gpu_step.add_common_arguments(parser, steps=30)
    args = parser.parse_args()

    if args.build_only:
        if not args.arch:
            sys.exit("error: --build-only needs --arch=sm_XY")
        os.makedirs(args.build_only, exist_ok=True)
        print(build_mpc(args, args.arch, args.build_only))
        return

    import torch
    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA device")
    major, minor = torch.cuda.get_device_capability()
    print(f"device: {torch.cuda.get_device_name()} (sm_{major}{minor}); "
          f"ResNet-50 batch {BATCH} {IMAGE}x{IMAGE}, bf16, SGD momentum 0.9; "
          f"PyTorch {torch.__version__}")
    with tempfile.TemporaryDirectory() as workdir:
        if args.prebuilt:
            program = os.path.join(args.prebuilt, "resnet50", "bench")
        else:
            program = build_mpc(args, f"sm_{major}{minor}", workdir)
        launches, graphs = gpu_step.time_mpc(args, program)
    results = [("mpc", *launches), ("mpc graphs", *graphs),
               ("torch AMP", *time_torch(args, False)),
               ("torch AMP NHWC", *time_torch(args, True))]
    header = (f"{'runner':<15} {'ms/step':>9} {'images/s':>9} "
              f"{'peak MiB':>9} {'vs mpc':>7}")
    print(header)
    print("-" * len(header))
    for runner, ms, memory in results:
        print(f"{runner:<15} {ms:>9.3f} {BATCH / (ms / 1e3):>9.0f} "
              f"{memory / 2**20:>9.0f} {ms / results[0][1]:>7.2f}")


if __name__ == "__main__":
    main()
