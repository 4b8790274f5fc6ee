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

and prints ms/step, tokens/s, peak memory (mpc: its arenas, cuBLASLt's
workspace included, and any workspace of its own for cuDNN plans larger
than planned, mpc_session_workspace_bytes: all it allocates; PyTorch:
torch.cuda.max_memory_allocated) and the model FLOP utilisation (nanoGPT's
estimate: 6 * parameters + 12 * layers * context * width FLOPs per token,
against the GPU's dense half-precision peak; --peak-tflops to override),
and the ratios of PyTorch's times to mpc's.

Run by hand on a machine with a GPU, after building with the CUDA toolkit:

  /usr/bin/python3 tools/bench/gpu_step.py [--build-dir=build] [--steps=50]
      [--warmup=10] [--configs=example,gpt2-small] [--batch-gpt2=8]
      [--half=bf16] [--torch-optimizer=adamw] [--peak-tflops=989]
      [--mpc-only] [--no-torch-compile]
      [--attention [--attention-shape=8,12,1024,64]]

With --attention, the attention kernels alone instead, at GPT-2 small's
shape (batch 8, 12 heads, 1024 tokens, head dim 64, causal; --attention-
shape=B,H,T,D to change it): mpc's forward, dK/dV and dQ kernels (a model
of one mpc.attention whose parameters are q, k and v, its step's
attention kernels timed by Nsight Compute's `ncu --clock-control none`,
the median of --steps steps) against PyTorch's
F.scaled_dot_product_attention forward and backward (CUDA events, median
of as many calls), in TFLOP/s by FlashAttention-2's count (forward 4 B H
T² D, halved when causal; backward 2.5 times the forward).

Needs PyTorch with CUDA (`pip install torch`), and cuBLASLt on the loader's
path (the script adds the toolkit's lib64).

A GPU machine without the MLIR toolchain can time programs built elsewhere:

  gpu_step.py --build-only=DIR --arch=sm_90 [options]   (here: mpc, c++)
  gpu_step.py --prebuilt=DIR [the same options]         (there: the GPU)

The first compiles and links each configuration's program into DIR/<name>/
and needs neither PyTorch nor a GPU; the second times those programs.

"""

import argparse
import collections
import csv
import io
import os
import re
import shutil
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
    # For tools/bench/gpt2_static.py's FP8 figures (not run on a GPU here).
    "gpt2-xl": (50304, 1024, 1600, 25, 48, 4),
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


def attention_mlir(name, batch, heads, tokens, dim, causal=True):
    """One mpc.attention whose parameters are q, k and v ([B, H, T, D]);
    the loss weighs each output element by an input, so that every
    gradient is computed."""
    t = f"tensor<{batch}x{heads}x{tokens}x{dim}xf32>"
    scale = 1.0 / dim ** 0.5
    return f"""mpc.model @{name}
    inputs(%r: {t})
    params(%q: {t} = normal(0.5), %k: {t} = normal(0.5),
           %v: {t} = normal(1.0)) {{
  %y, %lse = mpc.attention %q, %k, %v scale {scale!r}{' causal' if causal else ''}
      : {t}, {t}, {t}
  %p = mpc.mul %y, %r : {t}, {t}
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : {t}
  mpc.output loss(%loss : tensor<f32>)
}}
"""


def attention_flops(batch, heads, tokens, dim, causal=True):
    """FlashAttention-2's count: (forward, backward) FLOPs."""
    forward = 4 * batch * heads * tokens * tokens * dim / (2 if causal else 1)
    return forward, 2.5 * forward


# ----------------------------------------------------------------------------
# mpc

def build_mpc(args, name, config, arch, workdir, source_text=None):
    """Compiles and links the configuration's timing program; its path."""
    source = os.path.join(workdir, f"{name}.mlir")
    if source_text is None:
        vocab, context, width, heads, layers, batch = config
        source_text = gpt_mlir(name, vocab, context, width, heads, layers,
                               batch)
    with open(source, "w") as f:
        f.write(source_text)
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
# The attention kernels alone (--attention)

def ncu_attention_times(args, program):
    """Median ms a step of mpc's forward, dK/dV and dQ attention kernels,
    and of the step's other kernels, over args.steps steps, from Nsight
    Compute at the GPU's own clocks; None without ncu."""
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not os.path.exists(ncu):
        return None
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.cuda_lib + ":" + env.get("LD_LIBRARY_PATH", "")
    result = subprocess.run(
        [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
         "--csv", "--print-units", "base", program, f"--bench={args.steps}",
         "--warmup=2"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: ncu {program}: {result.stdout}{result.stderr}")
    per_kernel = collections.defaultdict(list)
    text = result.stdout[result.stdout.index('"ID"'):]
    for row in csv.DictReader(io.StringIO(text)):
        value = float(row["Metric Value"].replace(",", ""))
        # mpc's kernels are <model>_k<N>_<kind> (mangled or not).
        match = re.search(r"_k\d+_([a-z_]+\d*)", row["Kernel Name"])
        kind = match.group(1) if match else row["Kernel Name"]
        per_kernel[kind].append(value * 1e-6)  # ns -> ms
    steps = len(per_kernel["attention"])
    if not steps:
        sys.exit("error: ncu saw no forward attention kernel among " +
                 ", ".join(sorted(per_kernel)))
    times = {kind: sum(values) / steps for kind, values in per_kernel.items()}
    return {"forward": times.pop("attention"),
            "dK/dV": times.pop("attention_grad_kv"),
            "dQ": times.pop("attention_grad_q"), "other": times}


def time_torch_attention(args, shape):
    """Median ms of F.scaled_dot_product_attention's forward and backward
    on bf16/f16 [B, H, T, D] tensors, causal, from CUDA events."""
    import torch
    import torch.nn.functional as F
    half = torch.bfloat16 if args.half == "bf16" else torch.float16
    q, k, v = (torch.randn(shape, device="cuda", dtype=half,
                           requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=half)
    forward, backward = [], []
    for step in range(args.warmup + args.steps):
        events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        events[0].record()
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        events[1].record()
        y.backward(dout)
        events[2].record()
        torch.cuda.synchronize()
        if step >= args.warmup:
            forward.append(events[0].elapsed_time(events[1]))
            backward.append(events[1].elapsed_time(events[2]))
        q.grad = k.grad = v.grad = None
    return statistics.median(forward), statistics.median(backward)


def attention_main(args):
    shape = tuple(int(n) for n in args.attention_shape.split(","))
    name = "bench_attention"
    if args.build_only:
        if not args.arch:
            sys.exit("error: --build-only needs --arch=sm_XY")
        os.makedirs(args.build_only, exist_ok=True)
        print(build_mpc(args, name, None, args.arch, args.build_only,
                        attention_mlir(name, *shape)))
        return
    import torch
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    print(f"device: {torch.cuda.get_device_name()} ({arch}); attention "
          f"[B, H, T, D] = {list(shape)}, causal, {args.half}; PyTorch "
          f"{torch.__version__}")
    with tempfile.TemporaryDirectory() as workdir:
        if args.prebuilt:
            program = os.path.join(args.prebuilt, name, "bench")
        else:
            program = build_mpc(args, name, None, arch, workdir,
                                attention_mlir(name, *shape))
        step_ms = time_mpc(args, program)[0][0]
        kernels = ncu_attention_times(args, program)
    forward_flops, backward_flops = attention_flops(*shape)
    print(f"mpc step (attention, loss, AdamW on q, k, v): {step_ms:.3f} ms")
    print(f"{'runner':<22} {'forward ms':>10} {'TFLOP/s':>8} "
          f"{'backward ms':>11} {'TFLOP/s':>8}")
    rows = []
    if not args.mpc_only:
        rows.append(("torch SDPA", *time_torch_attention(args, shape)))
    if kernels:
        rows.insert(0, ("mpc kernels (ncu)", kernels["forward"],
                        kernels["dK/dV"] + kernels["dQ"]))
        others = sorted(kernels["other"].items(), key=lambda kv: -kv[1])
        print(f"  (mpc dK/dV {kernels['dK/dV']:.3f} ms, dQ "
              f"{kernels['dQ']:.3f} ms; the step's other kernels "
              f"{sum(kernels['other'].values()):.3f} ms: " +
              ", ".join(f"{kind} {ms:.3f}" for kind, ms in others[:4]) + ")")
    else:
        print("  (no ncu: mpc's kernels are not timed alone)")
    for runner, forward, backward in rows:
        print(f"{runner:<22} {forward:>10.3f} "
              f"{forward_flops / forward / 1e9:>8.1f} {backward:>11.3f} "
              f"{backward_flops / backward / 1e9:>8.1f}")


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
    parser.add_argument("--mpc-only", action="store_true",
                        help="time mpc alone (e.g. an earlier build's "
                             "programs beside this one's)")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="leave torch.compile out (it compiles for a "
                             "minute or more)")
    parser.add_argument("--attention", action="store_true",
                        help="time the attention kernels alone")
    parser.add_argument("--attention-shape", default="8,12,1024,64",
                        metavar="B,H,T,D")
    args = parser.parse_args()
    if args.attention:
        return attention_main(args)

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
            if not args.mpc_only:
                results.append(("torch AMP", *time_torch(args, config, False)))
                if not args.no_torch_compile:
                    results.append(("torch.compile",
                                    *time_torch(args, config, True)))
            mpc_ms = results[0][1]
            for runner, ms, memory in results:
                mfu = flops / (ms / 1e3) / peak if peak else float("nan")
                print(f"{config_name:<11} {runner:<14} {ms:>9.3f} "
                      f"{tokens / (ms / 1e3):>11.0f} {memory / 2**20:>9.0f} "
                      f"{100 * mfu:>5.1f}% {ms / mpc_ms:>7.2f}")


if __name__ == "__main__":
    main()
