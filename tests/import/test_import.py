"""`mpc import` end to end on PyTorch models (issue 17).

For each model of models.py: export it with torch.onnx.export in training
mode, import it with its weights, compile it for the cpu target and load it
from Python, then

  - O0 (and, for the GPT block, again from opset 14, whose layer norm the
    exporter writes out op by op): the loss and every parameter gradient on one batch match PyTorch in
    float64 on the same weights, and 10 SGD steps on fresh batches track
    PyTorch's losses and end at its parameters (and batch-norm state);
  - O2 f16 (dynamic loss scaling) and O2 bf16: 30 Adam steps on one batch
    lower the loss, and --report names the ONNX nodes;

for the GPT block, that --debug-nonfinite's report names the ONNX node
where an inf first appears; and for the MLP, the fine-tune round trip: PyTorch weights, load_weights,
20 steps, a checkpoint that PyTorch-side code reads back into the module,
equal to what the session's parameters are.

Tolerance, O0 against float64 PyTorch: per tensor, max |mpc - torch| is at
most 1e-4 times max(max |torch|, 1e-3) (float32 rounding over these depths
is ~1e-6; the floor is for gradients that are 0 in exact arithmetic, as a
convolution's bias before batch norm has).

Each model (and the round trip) runs in a process of its own: a process
holds three compiled libraries, and glibc's static TLS fits about five.

    test_import.py --mpc build/bin/mpc --work DIR [--models mlp,round_trip]

The CMake build runs it with --stage=build (the exports, the imports and
the compiles) and the test with --stage=test (the checks on what the build
compiled); without --stage it does both.
"""

import argparse
import filecmp
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

import mpc
from models import MODELS

TOLERANCE = 1e-4
STEPS = 10
LR = 0.05


def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def export_module(module, inputs, path, opset=17):
    """torch.onnx.export in training mode, inputs named input and target."""
    torch.onnx.export(module, inputs, path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      input_names=["input", "target"], output_names=["loss"],
                      opset_version=opset)


def export(name, path, opset=17):
    constructor, batch = MODELS[name]
    torch.manual_seed(0)
    module = constructor()
    export_module(module, batch(0), path, opset)
    return module


def build(args, onnx_path, directory, flags):
    """mpc import, then mpc compile --shared; the loaded model. The build
    runs the imports and compiles (--stage=build) and the test loads what
    it compiled (--stage=test), after checking that it was compiled with
    these flags."""
    mlir = os.path.join(directory, "model.mlir")
    weights = os.path.join(directory, "weights.safetensors")
    library = os.path.join(directory, "libmodel.so")
    stamp = os.path.join(directory, "flags")
    if args.stage == "test":
        built = open(stamp).read() if os.path.exists(stamp) else None
        if built != " ".join(flags):
            sys.exit(f"FAIL: {directory} was not built with {flags} (built: "
                     f"{built}): the build's --stage=build and the test "
                     "disagree")
    else:
        os.makedirs(directory, exist_ok=True)
        run(args.mpc, "import", onnx_path, "-o", mlir, "--weights", weights,
            "--name", "model")
        run(args.mpc, "compile", mlir, "--shared", "-o", directory, *flags)
        with open(stamp, "w") as file:
            file.write(" ".join(flags))
    if args.stage == "build":
        return mlir, weights, None
    return mlir, weights, mpc.load(library)


def export_for_stage(args, export, name, onnx_path, **options):
    """export(name, onnx_path, **options), the module it exported. The test
    stage exports again beside the build's file and requires the same
    bytes: the module it checks against is the one the build compiled."""
    if args.stage != "test":
        return export(name, onnx_path, **options)
    again = onnx_path.replace(".onnx", ".test.onnx")
    module = export(name, again, **options)
    if not filecmp.cmp(again, onnx_path, shallow=False):
        sys.exit(f"FAIL: {again} differs from the build's {onnx_path}: "
                 "the export is not deterministic, or the build is stale")
    return module


def numpy_inputs(batch):
    return [t.numpy().astype(np.float32) if t.is_floating_point() else t.numpy()
            for t in batch]


def worst(name, ours, reference):
    reference = reference.detach().double().numpy()
    scale = max(np.abs(reference).max(), 1e-3)
    error = np.abs(ours.astype(np.float64) - reference).max() / scale
    if error > TOLERANCE:
        sys.exit(f"FAIL: {name}: relative error {error:.3g} > {TOLERANCE}")
    return error


def check_o0(args, name, module, onnx_path, label="O0"):
    directory = os.path.join(args.work, name, label)
    mlir, weights, model = build(args, onnx_path, directory,
                                 ["--amp=O0", "--optimizer=sgd", f"--lr={LR}"])
    if model is None:
        return mlir
    # The exported weights, batch-norm statistics included (the export ran
    # the module in training mode, which moved them).
    module.load_state_dict(read_safetensors(weights), strict=False)
    reference = module.double()
    optimizer = torch.optim.SGD(reference.parameters(), lr=LR)
    constructor, batch_of = MODELS[name]
    largest = 0.0
    with model.session(seed=0) as session:
        missing, unexpected = session.load_weights(weights)
        assert not missing and not unexpected, (missing, unexpected)

        # One batch: loss and gradients. compute_gradients leaves the
        # state as it was; PyTorch's forward moves it, so it is put back.
        batch = batch_of(100)
        before = {k: v.clone() for k, v in reference.state_dict().items()}
        loss = session.compute_gradients(*numpy_inputs(batch))
        optimizer.zero_grad()
        expected = reference(*[t.double() if t.is_floating_point() else t
                               for t in batch])
        expected.backward()
        largest = max(largest, worst(f"{name} loss", np.array(loss), expected))
        for parameter, tensor in reference.named_parameters():
            largest = max(largest, worst(f"{name} d{parameter}",
                                         session.gradient(parameter),
                                         tensor.grad))
        reference.load_state_dict(before)

        # Training: the same SGD steps on fresh batches.
        for step in range(STEPS):
            batch = batch_of(200 + step)
            loss = session.train_step(*numpy_inputs(batch))
            optimizer.zero_grad()
            expected = reference(*[t.double() if t.is_floating_point() else t
                                   for t in batch])
            expected.backward()
            optimizer.step()
            largest = max(largest, worst(f"{name} step {step} loss",
                                         np.array(loss), expected))
        for key, tensor in reference.state_dict().items():
            if key.endswith("num_batches_tracked") or key == "causal":
                continue
            largest = max(largest, worst(f"{name} {key} after {STEPS} steps",
                                         session.param(key), tensor))
    print(f"{name} {label}: loss, gradients and {STEPS} SGD steps match "
          f"PyTorch (float64); largest relative error {largest:.2e}")
    return mlir


def check_o2(args, name, onnx_path, flags, label):
    directory = os.path.join(args.work, name, label)
    mlir, weights, model = build(args, onnx_path, directory,
                                 ["--amp=O2", *flags, "--optimizer=adam",
                                  "--lr=0.01"])
    if model is None:
        return
    batch = numpy_inputs(MODELS[name][1](300))
    with model.session(seed=0) as session:
        session.load_weights(weights)
        losses = [session.train_step(*batch) for _ in range(30)]
    if not losses[-1] < 0.7 * losses[0]:
        sys.exit(f"FAIL: {name} {label}: the loss did not fall: {losses}")
    report = run(args.mpc, "compile", mlir, "--amp=O2", *flags, "--report")
    if "/SoftmaxCrossEntropyLoss" not in report and "mse_loss:" not in report:
        sys.exit(f"FAIL: {name} {label}: --report does not name the loss's "
                 f"ONNX node:\n{report}")
    print(f"{name} {label}: loss {losses[0]:.4f} -> {losses[-1]:.4f} in 30 "
          f"Adam steps")


def check_nonfinite_locator(args, name, onnx_path, parameter, node):
    """An inf put into `parameter`: --debug-nonfinite's report names the
    ONNX node that first produced a non-finite value."""
    directory = os.path.join(args.work, name, "debug_nonfinite")
    _, weights, model = build(args, onnx_path, directory,
                              ["--debug-nonfinite"])
    if model is None:
        return
    batch = numpy_inputs(MODELS[name][1](500))
    with model.session(seed=0) as session:
        session.load_weights(weights)
        value = session.param(parameter)
        value.flat[7] = np.inf
        session.set_param(parameter, value)
        session.train_step(*batch)
        report = session.nonfinite_report()
    if not report or node not in report["location"]:
        sys.exit(f"FAIL: {name}: the nonfinite report does not name {node}: "
                 f"{report}")
    print(f"{name}: an inf in {parameter} is reported at "
          f"{report['location']!r}")


def read_safetensors(path):
    """The checkpoint as PyTorch-side code reads it (the format's spec)."""
    with open(path, "rb") as file:
        size = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(size))
        data = file.read()
    tensors = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[entry["dtype"]]
        tensors[key] = torch.from_numpy(
            np.frombuffer(data[begin:end], dtype).reshape(entry["shape"]).copy())
    return tensors


def check_round_trip(args):
    """PyTorch weights -> mpc_load_weights -> 20 steps -> checkpoint ->
    PyTorch's load_state_dict."""
    name = "mlp"
    directory = os.path.join(args.work, "round_trip")
    os.makedirs(directory, exist_ok=True)
    onnx_path = os.path.join(directory, "mlp.onnx")
    module = export_for_stage(args, export, name, onnx_path)
    _, weights, model = build(args, onnx_path, directory,
                              ["--amp=O2", "--half=bf16", "--optimizer=adamw",
                               "--lr=0.01"])
    if model is None:
        return
    checkpoint = os.path.join(directory, "checkpoint.safetensors")
    with model.session(seed=0) as session:
        session.load_weights(weights)
        for step in range(20):
            session.train_step(*numpy_inputs(MODELS[name][1](400 + step)))
        session.save(checkpoint)
        trained = session.params()
    state = {key: tensor for key, tensor in read_safetensors(checkpoint).items()
             if not key.startswith("optimizer.")}
    module.load_state_dict(state, strict=True)
    for key, tensor in module.state_dict().items():
        if not np.array_equal(tensor.numpy(), trained[key]):
            sys.exit(f"FAIL: round trip: {key} differs from mpc_get_param")
    print("round trip: 20 O2 bf16 AdamW steps from PyTorch's weights, the "
          "checkpoint loads into the PyTorch module (strict) and equals "
          "mpc_get_param")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--models", default=",".join([*MODELS, "round_trip"]))
    parser.add_argument("--stage", choices=["all", "build", "test"],
                        default="all",
                        help="build: export, import and compile only (the "
                        "CMake build runs it); test: check what it built")
    args = parser.parse_args()
    names = args.models.split(",")
    if len(names) > 1:
        # One process per model: each process holds three of the compiled
        # libraries, and glibc's static TLS fits about five.
        if args.stage != "test":
            shutil.rmtree(args.work, ignore_errors=True)
        for name in names:
            result = subprocess.run([sys.executable, __file__, "--mpc",
                                     args.mpc, "--work", args.work,
                                     "--models", name, "--stage", args.stage])
            if result.returncode != 0:
                sys.exit(f"FAIL: {name}")
        print("PASS")
        return
    torch.set_num_threads(1)
    # The generated host code unoptimised, as test_torchvision.py's: it
    # compiles in a third of the time, the steps of these small models are
    # libmpcrt's GEMMs, and -ffp-contract=off gives the same bits at -O0.
    os.environ["CXXFLAGS"] = "-O0"
    name = names[0]
    if name == "round_trip":
        check_round_trip(args)
        return
    os.makedirs(os.path.join(args.work, name), exist_ok=True)
    onnx_path = os.path.join(args.work, name, f"{name}.onnx")
    module = export_for_stage(args, export, name, onnx_path)
    check_o0(args, name, module, onnx_path)
    check_o2(args, name, onnx_path, ["--half=f16"], "O2_f16")
    check_o2(args, name, onnx_path, ["--half=bf16"], "O2_bf16")
    if name == "gpt_block":
        check_nonfinite_locator(args, name, onnx_path, "c_fc.weight",
                                f"{name}.onnx:83:1 /c_fc/Transpose")
        # Opsets before 17 write layer norm out in ReduceMean, Sub, Pow,
        # Sqrt, Div, Mul and Add; the import puts it back together.
        onnx_path = os.path.join(args.work, name, f"{name}_opset14.onnx")
        module = export_for_stage(args, export, name, onnx_path, opset=14)
        mlir = check_o0(args, name, module, onnx_path, "O0_opset14")
        if args.stage == "build":
            return
        with open(mlir) as file:
            norms = file.read().count("mpc.layer_norm")
        if norms != 3:
            sys.exit(f"FAIL: opset 14: {norms} mpc.layer_norm, expected 3")


if __name__ == "__main__":
    main()
