#!/usr/bin/python3
"""Time one training step of each example on the cpu target, against PyTorch.

For every example (mlp, gpt, resnet), on 1 thread and on every core this
process may use (N), this runs:

  mpc      MPC_THREADS=<t> build/examples/apps/train_<model> --bench=S
           --warmup=W: the median wall time of mpc_train_step (forward,
           backward, SGD update) over S steps on one batch, after W untimed
           ones;
  PyTorch  the same model written with torch.nn, mirroring examples/<model>.mlir
           (same shapes, layers, loss and optimizer: SGD, lr 0.01, no
           momentum, as `mpc compile` defaults), the same batch size, on the
           same number of threads (torch.set_num_threads(t), and
           OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=t for the BLAS it calls): the
           median of S steps of zero_grad, forward, backward and
           optimizer.step after W untimed ones, in a fresh process each time.

Each is measured --repeats times, alternating, and the smallest median counts
(this machine's background load only ever adds time). It prints both times
and their ratio (mpc / PyTorch: below 1 means mpc is faster) for each thread
count, and each one's speed-up from 1 thread to N.

Debian's python3-torch does its GEMMs through the system's libblas.so.3
(BLAS_INFO=generic): the unoptimised reference BLAS unless an optimised one
is installed, e.g. `apt-get install -y libopenblas0-pthread`. The BLAS in use
is printed; compare with OpenBLAS for a fair picture.

Before timing, each PyTorch model's parameters are checked against the
params(...) list of the .mlir file: same names, same shapes, same order.

Run by hand, not by ctest, after building (tools/setup.sh or
`cmake -S . -B build -G Ninja && ninja -C build`):

  /usr/bin/python3 tools/bench/cpu_step.py [--build-dir=build] [--steps=50]
      [--warmup=10] [--repeats=3] [--models=mlp,gpt,resnet] [--install-torch]

PyTorch comes from Debian, which tools/setup.sh does not install:
`apt-get install -y python3-torch libopenblas0-pthread`, or pass
--install-torch (runs that apt-get command; needs root).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                        help="CMake build directory (default: build)")
    parser.add_argument("--steps", type=int, default=50,
                        help="timed steps per measurement (default 50)")
    parser.add_argument("--warmup", type=int, default=10,
                        help="untimed steps first (default 10)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="measurements per configuration, alternating "
                             "mpc and PyTorch; the best median counts "
                             "(default 3)")
    parser.add_argument("--models", default="mlp,gpt,resnet",
                        help="comma-separated examples (default all)")
    parser.add_argument("--install-torch", action="store_true",
                        help="apt-get install -y python3-torch "
                             "libopenblas0-pthread first")
    # Internal: time one PyTorch configuration in this (fresh) process.
    parser.add_argument("--torch-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        parser.error("--steps and --repeats must be >= 1, --warmup >= 0")
    return args


def import_torch(install):
    if install:
        subprocess.run(["apt-get", "install", "-y", "python3-torch",
                        "libopenblas0-pthread"], check=True)
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("error: PyTorch is not installed; run `apt-get install -y "
                 "python3-torch` (or pass --install-torch) and use "
                 "/usr/bin/python3")
    import torch
    return torch


# ---------------------------------------------------------------------------
# PyTorch mirrors of examples/*.mlir


def build_models(torch):
    nn = torch.nn
    F = torch.nn.functional

    class Mlp(nn.Module):
        """examples/mlp.mlir: 784 -> 256 -> relu -> 10, batch 64."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 256)
            self.fc2 = nn.Linear(256, 10)

        def forward(self, x, y):
            return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)

        @staticmethod
        def batch():
            return (torch.randn(64, 784), torch.randint(0, 10, (64,)))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)
            self.proj = nn.Linear(32, 32)

        def forward(self, x, causal):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(32, dim=2)
            # [B, T, C] -> [B, T, H, Dh] -> [B, H, T, Dh]
            q = q.reshape(B, T, 2, 16).transpose(1, 2)
            k = k.reshape(B, T, 2, 16).transpose(1, 2)
            v = v.reshape(B, T, 2, 16).transpose(1, 2)
            scores = torch.matmul(q, k.transpose(-2, -1)) * 0.25
            masked = torch.where(causal, scores,
                                 torch.tensor(float("-inf")))
            y = torch.matmul(F.softmax(masked, dim=3), v)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

    class Mlp4(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32, 128)
            self.proj = nn.Linear(128, 32)

        def forward(self, x):
            return self.proj(F.gelu(self.fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(32)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(32)
            self.mlp = Mlp4()

        def forward(self, x, causal):
            x = x + self.attn(self.ln_1(x), causal)
            return x + self.mlp(self.ln_2(x))

    class Gpt(nn.Module):
        """examples/gpt.mlir: vocab 64, context 16, width 32, 2 heads, 2
        pre-norm blocks, untied head without bias, batch 4."""

        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(64, 32)
            self.wpe = nn.Embedding(16, 32)
            self.h0 = Block()
            self.h1 = Block()
            self.ln_f = nn.LayerNorm(32)
            self.lm_head = nn.Linear(32, 64, bias=False)
            self.register_buffer(
                "causal", torch.tril(torch.ones(16, 16, dtype=torch.bool)),
                persistent=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe.weight  # the whole [16, 32] table
            x = self.h1(self.h0(x, self.causal), self.causal)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.reshape(64, 64), targets)

        @staticmethod
        def batch():
            return (torch.randint(0, 64, (4, 16)),
                    torch.randint(0, 64, (64,)))

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False),
                    nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            shortcut = x if self.downsample is None else self.downsample(x)
            return F.relu(out + shortcut)

    class ResNet(nn.Module):
        """examples/resnet.mlir: 3x32x32 -> conv3x3+bn+relu+maxpool ->
        basic block 16 -> basic block 32 (stride 2) -> avgpool -> fc 10,
        batch 8."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.layer1 = nn.Sequential(BasicBlock(16, 16, 1))
            self.layer2 = nn.Sequential(BasicBlock(16, 32, 2))
            self.fc = nn.Linear(32, 10)

        def forward(self, images, labels):
            x = F.relu(self.bn1(self.conv1(images)))
            x = F.max_pool2d(x, 3, 2, 1)
            x = self.layer2(self.layer1(x))
            x = F.avg_pool2d(x, 8).reshape(8, 32)
            return F.cross_entropy(self.fc(x), labels)

        @staticmethod
        def batch():
            return (torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))

    return {"mlp": Mlp, "gpt": Gpt, "resnet": ResNet}


def mlir_params(model):
    """(name, shape) of every parameter in examples/<model>.mlir."""
    with open(os.path.join(REPO, "examples", model + ".mlir")) as f:
        text = f.read()
    start = text.index("params(")
    end = text.find("state(", start)
    if end < 0:
        end = text.index(") {", start)
    return [(name, tuple(int(d) for d in dims.split("x")))
            for name, dims in re.findall(
                r"%([\w.]+): tensor<([\dx]+)x[a-z0-9]+>", text[start:end])]


def check_mirror(torch_model, model):
    expected = mlir_params(model)
    actual = [(name, tuple(p.shape))
              for name, p in torch_model.named_parameters()]
    if actual != expected:
        sys.exit("error: the PyTorch %s does not mirror examples/%s.mlir:\n"
                 "  mlir:  %s\n  torch: %s" % (model, model, expected, actual))
    return sum(p.numel() for p in torch_model.parameters())


# ---------------------------------------------------------------------------
# Timing


def time_mpc(build_dir, model, steps, warmup, threads):
    app = os.path.join(build_dir, "examples", "apps", "train_" + model)
    if not os.path.exists(app):
        sys.exit("error: %s does not exist; build first (ninja -C %s)"
                 % (app, build_dir))
    env = dict(os.environ, MPC_THREADS=str(threads))
    out = subprocess.run([app, "--bench=%d" % steps, "--warmup=%d" % warmup],
                         check=True, capture_output=True, text=True,
                         env=env).stdout
    match = re.search(r"median step ([0-9.]+) ms", out)
    if not match:
        sys.exit("error: unexpected output from %s:\n%s" % (app, out))
    return float(match.group(1))


def time_torch(torch, model_class, steps, warmup, threads):
    """Median step in ms; `threads` None leaves PyTorch's default."""
    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = model_class()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = model_class.batch()
    seconds = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(*batch)
        loss.backward()
        optimizer.step()
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
    return 1e3 * statistics.median(seconds)


def blas_library():
    """The libblas.so.3 this process has mapped, resolved."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libblas" in path or "openblas" in path:
                return os.path.realpath(path)
    return "unknown"


def blas_threads(library):
    """OpenBLAS's thread count, or 1 for a BLAS that has no threads."""
    import ctypes
    try:
        return ctypes.CDLL(library).openblas_get_num_threads()
    except (OSError, AttributeError):
        return 1


def child(args):
    """--torch-child=<model>,<threads|default>: prints
    '<ms> <torch threads> <BLAS threads> <BLAS library>'."""
    name, threads = args.torch_child.split(",")
    torch = import_torch(False)
    models = build_models(torch)
    ms = time_torch(torch, models[name], args.steps, args.warmup,
                    None if threads == "default" else int(threads))
    library = blas_library()
    print("%.6f %d %d %s" % (ms, torch.get_num_threads(),
                             blas_threads(library), library))


def run_child(args, name, threads):
    env = dict(os.environ)
    if threads != "default":
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__),
         "--torch-child=%s,%s" % (name, threads), "--steps=%d" % args.steps,
         "--warmup=%d" % args.warmup],
        check=True, capture_output=True, text=True, env=env).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), out[3]


def best_of(repeats, measure):
    """The smallest of `repeats` medians: this machine's background load
    only ever adds time."""
    return min(measure() for _ in range(repeats))


def main():
    args = parse_args()
    if args.torch_child:
        return child(args)
    torch = import_torch(args.install_torch)
    models = build_models(torch)
    cores = len(os.sched_getaffinity(0)) or 1
    settings = sorted({1, cores})
    names = args.models.split(",")
    for name in names:
        if name not in models:
            sys.exit("error: unknown model '%s' (mlp, gpt, resnet)" % name)

    print("cpu step benchmark: best of %d medians of %d steps after %d "
          "warm-up, PyTorch %s, %d cores" % (args.repeats, args.steps,
                                             args.warmup, torch.__version__,
                                             cores))
    header = "%-7s %8s" % ("model", "params")
    for threads in settings:
        header += " | %-8s %-10s %5s" % ("mpc ms", "torch ms", "ratio")
    print("%-7s %8s" % ("", "") + "".join(
        " | %-25s" % ("%d thread%s" % (t, "" if t == 1 else "s"))
        for t in settings) + (" | speed-up %d/1 threads" % cores
                              if cores > 1 else ""))
    print(header + (" | %-6s %-6s" % ("mpc", "torch") if cores > 1 else ""))
    blas = set()
    for name in names:
        count = check_mirror(models[name](), name)
        line = "%-7s %8d" % (name, count)
        times = {}
        for threads in settings:
            mpc_ms = best_of(args.repeats, lambda: time_mpc(
                args.build_dir, name, args.steps, args.warmup, threads))
            libraries = []

            def torch_once():
                ms, _, _, library = run_child(args, name, threads)
                libraries.append(library)
                return ms
            torch_ms = best_of(args.repeats, torch_once)
            blas.update(libraries)
            times[threads] = (mpc_ms, torch_ms)
            line += " | %-8.3f %-10.3f %5.2f" % (mpc_ms, torch_ms,
                                                 mpc_ms / torch_ms)
        if cores > 1:
            line += " | %-6.2f %-6.2f" % (times[1][0] / times[cores][0],
                                          times[1][1] / times[cores][1])
        print(line)
        sys.stdout.flush()
    print("ratio = mpc / PyTorch on the same number of threads (below 1: mpc "
          "is faster); speed-up = time on 1 thread / time on %d; PyTorch's "
          "BLAS: %s" % (cores, ", ".join(sorted(blas))))


if __name__ == "__main__":
    main()
