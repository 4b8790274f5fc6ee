#!/usr/bin/python3
"""Time GPT training steps on a GPU: mpc's cuda target against PyTorch.

For each configuration (the GPT example, and GPT-2 small: 12 layers, width
768, 12 heads, context 1024, vocabulary 50304) this runs, in one go:

  mpc            the model compiled with `mpc compile --target=cuda
                 --arch=<this GPU> --amp=O2 --half=<half>` with the
                 optimizer PyTorch uses (--torch-optimizer: AdamW by
                 default, or SGD), linked with tests/cuda/train_steps.cpp
                 and timed with --bench: the median wall time of
                 mpc_train_step over N steps on one batch after W untimed
                 ones (each step ends with its loss on the host);
  mpc graphs     the same library with --cuda-graphs: each step replayed
                 as one CUDA graph (mpc_session_options.cuda_graphs);
  PyTorch AMP    the same model in torch.nn (nanoGPT's layout, as
                 examples/gpt.mlir), torch.autocast(<half>) with a GradScaler
                 for f16, fused AdamW (or SGD with --torch-optimizer=sgd);
                 median of N steps after W, each synchronised;
  torch.compile  the same, with the model wrapped in torch.compile;

and prints ms/step, tokens/s, peak memory (mpc: its arenas, which are all it
allocates, cuBLASLt's workspace included; PyTorch:
torch.cuda.max_memory_allocated) and the model FLOP utilisation (nanoGPT's
estimate: 6 * parameters + 12 * layers * context * width FLOPs per token,
against the GPU's dense half-precision peak; --peak-tflops to override),
and the ratios of PyTorch's times to mpc's.

Run by hand on a machine with a GPU, after building with the CUDA toolkit:

  /usr/bin/python3 tools/bench/gpu_step.py [--build-dir=build] [--steps=50]
      [--warmup=10] [--configs=example,gpt2-small] [--batch-gpt2=8]
      [--half=bf16] [--torch-optimizer=adamw] [--peak-tflops=989]

Needs PyTorch with CUDA (`pip install torch`), and cuBLASLt on the loader's
path (the script adds the toolkit's lib64).

A GPU machine without the MLIR toolchain can time programs built elsewhere:

  gpu_step.py --build-only=DIR --arch=sm_90 [options]   (here: mpc, c++)
  gpu_step.py --prebuilt=DIR [the same options]         (there: the GPU)

The first compiles and links each configuration's program into DIR/<name>/
and needs neither PyTorch nor a GPU; the second times those programs.

"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# name: (vocab, context, width, heads, layers, batch)
CONFIGS = {
    "example": (64, 16, 32, 2, 2, 4),
    "gpt2-small": (50304, 1024, 768, 12, 12, 8),
}

# Dense half-precision tensor-core peaks, FLOP/s, by device name.
PEAKS = [("H200", 989e12), ("H100", 989e12), ("A100", 312e12),
         ("L40S", 362e12), ("A10", 125e12), ("L4", 121e12),
         ("RTX 4090", 165e12), ("RTX 3090", 71e12)]


# ----------------------------------------------------------------------------
# The model, as mpc dialect source: for the "example" configuration the
# same ops in the same order as examples/gpt.mlir (the same kernels).

def gpt_mlir(name, vocab, context, width, heads, layers, batch):
    B, T, C, H, V = batch, context, width, heads, vocab
    D = C // H
    x3 = f"tensor<{B}x{T}x{C}xf32>"
    params = [f"%wte.weight: tensor<{V}x{C}xf32> = normal(0.02)",
              f"%wpe.weight: tensor<{T}x{C}xf32> = normal(0.02)"]
    for i in range(layers):
        h = f"%h{i}"
        params += [f"{h}.ln_1.weight: tensor<{C}xf32> = ones",
                   f"{h}.ln_1.bias: tensor<{C}xf32> = zeros",
                   f"{h}.attn.qkv.weight: tensor<{3 * C}x{C}xf32> = normal(0.02)",
                   f"{h}.attn.qkv.bias: tensor<{3 * C}xf32> = zeros",
                   f"{h}.attn.proj.weight: tensor<{C}x{C}xf32> = normal(0.02)",
                   f"{h}.attn.proj.bias: tensor<{C}xf32> = zeros",
                   f"{h}.ln_2.weight: tensor<{C}xf32> = ones",
                   f"{h}.ln_2.bias: tensor<{C}xf32> = zeros",
                   f"{h}.mlp.fc.weight: tensor<{4 * C}x{C}xf32> = normal(0.02)",
                   f"{h}.mlp.fc.bias: tensor<{4 * C}xf32> = zeros",
                   f"{h}.mlp.proj.weight: tensor<{C}x{4 * C}xf32> = normal(0.02)",
                   f"{h}.mlp.proj.bias: tensor<{C}xf32> = zeros"]
    params += [f"%ln_f.weight: tensor<{C}xf32> = ones",
               f"%ln_f.bias: tensor<{C}xf32> = zeros",
               f"%lm_head.weight: tensor<{V}x{C}xf32> = normal(0.02)"]
    lines = [f"mpc.model @{name}",
             f"    inputs(%idx: tensor<{B}x{T}xi32>, %targets: tensor<{B * T}xi32>)",
             "    params(" + ",\n           ".join(params) + ") {",
             f"  %tok = mpc.embedding %wte.weight, %idx : tensor<{V}x{C}xf32>, tensor<{B}x{T}xi32>",
             f"  %x0 = mpc.add %tok, %wpe.weight : {x3}, tensor<{T}x{C}xf32>",
             f"  %causal = mpc.causal_mask : tensor<{T}x{T}xi1>",
             "  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>"]
    x4 = f"tensor<{B}x{T}x{H}x{D}xf32>"
    bh = f"tensor<{B}x{H}x{T}x{D}xf32>"
    att = f"tensor<{B}x{H}x{T}x{T}xf32>"
    x = "%x0"
    for i in range(layers):
        b, h = f"%b{i}", f"%h{i}"
        lines += [
            f"  {b}_ln1 = mpc.layer_norm {x}, {h}.ln_1.weight, {h}.ln_1.bias : {x3}, tensor<{C}xf32>",
            f"  {b}_qkv = mpc.linear {b}_ln1, {h}.attn.qkv.weight, {h}.attn.qkv.bias : {x3}, tensor<{3 * C}x{C}xf32>, tensor<{3 * C}xf32>"]
        lines += [f"  {b}_{part} = mpc.slice {b}_qkv starts [0, 0, {j * C}] limits [{B}, {T}, {(j + 1) * C}] : tensor<{B}x{T}x{3 * C}xf32>"
                  for j, part in enumerate("qkv")]
        lines += [f"  {b}_{part}4 = mpc.reshape {b}_{part} : {x3} to {x4}"
                  for part in "qkv"]
        lines += [f"  {b}_{part}h = mpc.transpose {b}_{part}4 perm [0, 2, 1, 3] : {x4}"
                  for part in "qkv"]
        lines += [
            f"  {b}_qk = mpc.batch_matmul {b}_qh, {b}_kh transpose_rhs : {bh}, {bh}",
            f"  {b}_scores = mpc.scale {b}_qk by {D ** -0.5!r} : {att}",
            f"  {b}_masked = mpc.where %causal, {b}_scores, %neg_inf : tensor<{T}x{T}xi1>, {att}, tensor<f32>",
            f"  {b}_att = mpc.softmax {b}_masked dim 3 : {att}",
            f"  {b}_yh = mpc.batch_matmul {b}_att, {b}_vh : {att}, {bh}",
            f"  {b}_yt = mpc.transpose {b}_yh perm [0, 2, 1, 3] : {bh}",
            f"  {b}_y = mpc.reshape {b}_yt : {x4} to {x3}",
            f"  {b}_attn = mpc.linear {b}_y, {h}.attn.proj.weight, {h}.attn.proj.bias : {x3}, tensor<{C}x{C}xf32>, tensor<{C}xf32>",
            f"  %x{2 * i + 1} = mpc.add {x}, {b}_attn : {x3}, {x3}",
            f"  {b}_ln2 = mpc.layer_norm %x{2 * i + 1}, {h}.ln_2.weight, {h}.ln_2.bias : {x3}, tensor<{C}xf32>",
            f"  {b}_fc = mpc.linear {b}_ln2, {h}.mlp.fc.weight, {h}.mlp.fc.bias : {x3}, tensor<{4 * C}x{C}xf32>, tensor<{4 * C}xf32>",
            f"  {b}_gelu = mpc.gelu {b}_fc approximate tanh : tensor<{B}x{T}x{4 * C}xf32>",
            f"  {b}_mlp = mpc.linear {b}_gelu, {h}.mlp.proj.weight, {h}.mlp.proj.bias : tensor<{B}x{T}x{4 * C}xf32>, tensor<{C}x{4 * C}xf32>, tensor<{C}xf32>",
            f"  %x{2 * i + 2} = mpc.add %x{2 * i + 1}, {b}_mlp : {x3}, {x3}"]
        x = f"%x{2 * i + 2}"
    lines += [
        f"  %xf = mpc.layer_norm {x}, %ln_f.weight, %ln_f.bias : {x3}, tensor<{C}xf32>",
        f"  %logits = mpc.linear %xf, %lm_head.weight : {x3}, tensor<{V}x{C}xf32>",
        f"  %flat = mpc.reshape %logits : tensor<{B}x{T}x{V}xf32> to tensor<{B * T}x{V}xf32>",
        f"  %loss = mpc.cross_entropy %flat, %targets : tensor<{B * T}x{V}xf32>, tensor<{B * T}xi32>",
        f"  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<{B}x{T}x{V}xf32>)",
        "}"]
    return "\n".join(lines) + "\n"


def parameter_count(vocab, context, width, heads, layers):
    C = width
    per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + \
        (4 * C * C + 4 * C) + (4 * C * C + C)
    return vocab * C + context * C + layers * per_layer + 2 * C + vocab * C


def flops_per_token(vocab, context, width, heads, layers):
    # nanoGPT's estimate_mfu: 6N for the weights (forward + backward) and
    # 12 * L * T * C for attention.
    return 6 * parameter_count(vocab, context, width, heads, layers) + \
        12 * layers * context * width


# ----------------------------------------------------------------------------
# mpc

def build_mpc(args, name, config, arch, workdir):
    """Compiles and links the configuration's timing program; its path."""
    vocab, context, width, heads, layers, batch = config
    source = os.path.join(workdir, f"{name}.mlir")
    with open(source, "w") as f:
        f.write(gpt_mlir(name, vocab, context, width, heads, layers, batch))
    out = os.path.join(workdir, name)
    mpc = os.path.join(args.build_dir, "bin", "mpc")
    # The same optimizer as PyTorch's (fused into one pass either way).
    optimizer = (["--optimizer=adamw", "--lr=1e-4"]
                 if args.torch_optimizer == "adamw" else ["--lr=0.01"])
    subprocess.run([mpc, "compile", source, "--target=cuda", f"--arch={arch}",
                    "--amp=O2", f"--half={args.half}", *optimizer, "-o", out],
                   check=True)
    program = os.path.join(out, "bench")
    subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-O2",
                    f"-I{REPO}", f"-I{out}", f"-DMPC_MODEL={name}",
                    "-DMPC_TARGET_UNDER_TEST=MPC_TARGET_CUDA",
                    os.path.join(REPO, "tests", "cuda", "train_steps.cpp"),
                    os.path.join(out, f"lib{name}.a"),
                    os.path.join(args.build_dir, "lib", "libmpcrt.a"),
                    "-lz", "-ldl", "-o", program], check=True)
    return program


def time_mpc(args, program):
    """(ms/step, bytes) for kernel-by-kernel launches and for graphs."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.cuda_lib + ":" + env.get("LD_LIBRARY_PATH", "")
    timings = []
    for graphs in ([], ["--cuda-graphs"]):
        result = subprocess.run([program, f"--bench={args.steps}",
                                 f"--warmup={args.warmup}", *graphs], env=env,
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"error: {program}: {result.stdout}{result.stderr}")
        match = re.search(r"median_ms (\S+) min_ms \S+ arena_bytes (\d+)",
                          result.stdout)
        timings.append((float(match.group(1)), int(match.group(2))))
    return timings


# ----------------------------------------------------------------------------
# PyTorch

def time_torch(args, config, compiled):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    vocab, context, width, heads, layers, batch = config

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.ln_2 = nn.LayerNorm(width)
            self.fc = nn.Linear(width, 4 * width)
            self.mlp_proj = nn.Linear(4 * width, width)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln_1(x)).split(width, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2)
                       for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x)),
                                            approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(context, width)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe.weight
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, vocab), targets)

    device = "cuda"
    torch.manual_seed(0)
    model = Gpt().to(device)
    step_model = torch.compile(model) if compiled else model
    if args.torch_optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    half = torch.bfloat16 if args.half == "bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=args.half == "f16")
    idx = torch.randint(0, vocab, (batch, context), device=device)
    targets = torch.randint(0, vocab, (batch * context,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=half):
            loss = step_model(idx, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.item()  # ends the step on the host, as mpc's does

    return time_torch_steps(args, step)


def time_torch_steps(args, step):
    """(median ms, peak bytes) of args.steps calls of `step` after
    args.warmup untimed ones; each call ends with its loss on the host."""
    import torch
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times), torch.cuda.max_memory_allocated()


# ----------------------------------------------------------------------------

def add_common_arguments(parser, steps):
    """The options every GPU benchmark here takes: where mpc was built, the
    steps timed, and the --build-only/--prebuilt halves."""
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--cuda-lib", default="/usr/local/cuda/lib64")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--build-only", metavar="DIR",
                        help="compile and link the programs into DIR, time "
                             "nothing (no GPU or PyTorch needed)")
    parser.add_argument("--arch", help="with --build-only: the GPU's sm_XY")
    parser.add_argument("--prebuilt", metavar="DIR",
                        help="time the programs that --build-only left in DIR")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(parser, steps=50)
    parser.add_argument("--configs", default="example,gpt2-small")
    parser.add_argument("--batch-gpt2", type=int, default=8)
    parser.add_argument("--half", choices=["f16", "bf16"], default="bf16")
    parser.add_argument("--torch-optimizer", choices=["adamw", "sgd"],
                        default="adamw")
    parser.add_argument("--peak-tflops", type=float, default=0)
    args = parser.parse_args()

    def configurations():
        for config_name in args.configs.split(","):
            config = CONFIGS[config_name]
            if config_name == "gpt2-small":
                config = config[:5] + (args.batch_gpt2,)
            yield config_name, "bench_" + config_name.replace("-", "_"), config

    if args.build_only:
        if not args.arch:
            sys.exit("error: --build-only needs --arch=sm_XY")
        os.makedirs(args.build_only, exist_ok=True)
        for _, name, config in configurations():
            print(build_mpc(args, name, config, args.arch, args.build_only))
        return

    import torch
    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA device")
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    device_name = torch.cuda.get_device_name()
    peak = args.peak_tflops * 1e12
    if not peak:
        peak = next((p for key, p in PEAKS if key in device_name), 0)
    print(f"device: {device_name} ({arch}); peak {peak / 1e12:.0f} TFLOP/s "
          f"dense half; --amp=O2 --half={args.half}; PyTorch "
          f"{torch.__version__}, optimizer {args.torch_optimizer} (both)")

    header = (f"{'config':<11} {'runner':<14} {'ms/step':>9} {'tokens/s':>11} "
              f"{'peak MiB':>9} {'MFU':>6} {'vs mpc':>7}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as workdir:
        for config_name, name, config in configurations():
            vocab, context, width, heads, layers, batch = config
            tokens = batch * context
            flops = flops_per_token(vocab, context, width, heads, layers) * tokens
            if args.prebuilt:
                program = os.path.join(args.prebuilt, name, "bench")
            else:
                program = build_mpc(args, name, config, arch, workdir)
            launches, graphs = time_mpc(args, program)
            results = [("mpc", *launches), ("mpc graphs", *graphs)]
            results.append(("torch AMP", *time_torch(args, config, False)))
            results.append(("torch.compile", *time_torch(args, config, True)))
            mpc_ms = results[0][1]
            for runner, ms, memory in results:
                mfu = flops / (ms / 1e3) / peak if peak else float("nan")
                print(f"{config_name:<11} {runner:<14} {ms:>9.3f} "
                      f"{tokens / (ms / 1e3):>11.0f} {memory / 2**20:>9.0f} "
                      f"{100 * mfu:>5.1f}% {ms / mpc_ms:>7.2f}")


if __name__ == "__main__":
    main()
