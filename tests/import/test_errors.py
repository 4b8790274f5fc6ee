"""`mpc import` on bad input (issue 17): each case is an ONNX file built
here with onnx.helper (or broken bytes), and must end with exit code 1 and
a message that names what is wrong (the node, its op type and the opset
where a node is at fault), never a crash.

    test_errors.py --mpc build/bin/mpc --work DIR
"""

import argparse
import os
import shutil
import subprocess
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np


def linear_model(opset=17, batch=8, op="Relu", weight_type=np.float32,
                 weight_name="fc.weight", loss_shape=()):
    """input [batch, 4] -> Gemm(fc.weight) -> op -> ReduceMean -> loss."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 4])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT,
                                         list(loss_shape))
    weight = numpy_helper.from_array(np.ones((3, 4), weight_type), weight_name)
    nodes = [
        helper.make_node("Gemm", ["input", weight_name], ["h"], name="/fc/Gemm",
                         transB=1),
        helper.make_node(op, ["h"], ["a"], name="/act"),
        helper.make_node("ReduceMean", ["a"], ["loss"], name="/mean",
                         keepdims=0, **({"axes": [1]} if loss_shape else {})),
    ]
    graph = helper.make_graph(nodes, "g", [x], [loss], [weight])
    return helper.make_model(graph, producer_name="test_errors",
                             opset_imports=[helper.make_opsetid("", opset)])


def cases(work):
    good = linear_model()
    good_bytes = good.SerializeToString()
    yield "garbage", b"this is not a protobuf\xff\xff\xff", ["not an ONNX model"]
    yield "truncated", good_bytes[: len(good_bytes) // 2], ["truncated"]
    yield "empty", b"", ["no graph"]
    yield "unsupported op", linear_model(op="Cos"), [
        "node '/act' (Cos, opset 17)", "the operator Cos is not supported"]
    yield "lone erf", linear_model(op="Erf"), [
        "node '/act' (Erf, opset 17)", "mpc has gelu, not erf"]
    yield "opset too new", linear_model(opset=18), [
        "opset 18 is newer than 17", "opset_version=17"]
    yield "opset too old", linear_model(opset=11), ["opset 11 is older than 13"]
    dynamic = linear_model()
    dim = dynamic.graph.input[0].type.tensor_type.shape.dim[0]
    dim.ClearField("dim_value")
    dim.dim_param = "batch"
    yield "dynamic batch", dynamic, [
        "graph input 'input' has a dynamic extent 'batch'", "dynamic_axes"]
    yield "double weights", linear_model(weight_type=np.float64), [
        "the ONNX checker rejects it"]
    yield "sequential name", linear_model(weight_name="0.weight"), [
        "initializer '0.weight' cannot name a parameter"]
    yield "output not a scalar", linear_model(loss_shape=(8,)), [
        "must be the loss, a scalar FLOAT"]
    padded = linear_model()
    padded.graph.initializer.append(
        numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"))
    padded.graph.node[1].op_type = "Pad"
    padded.graph.node[1].input.append("pads")
    yield "nonzero pad", padded, [
        "node '/act' (Pad, opset 17)", "Pad other than by zero elements"]
    # A bound no constant evaluation can reach: the model's own input.
    run_time_bound = linear_model()
    run_time_bound.graph.input.append(
        helper.make_tensor_value_info("width", TensorProto.INT64, [1]))
    run_time_bound.graph.initializer.extend([
        numpy_helper.from_array(np.array([0], np.int64), "starts"),
        numpy_helper.from_array(np.array([1], np.int64), "axes")])
    run_time_bound.graph.node[1].op_type = "Slice"
    run_time_bound.graph.node[1].name = "/cut"
    run_time_bound.graph.node[1].input.extend(["starts", "width", "axes"])
    yield "run-time slice bound", run_time_bound, [
        "node '/cut' (Slice, opset 17)",
        "output 'a' has no static shape: its input 'width' (INT64) is "
        "computed from the model's inputs at run time"]
    out_of_range = linear_model(op="Gather")
    out_of_range.graph.initializer.append(
        numpy_helper.from_array(np.array([0, 3], np.int64), "columns"))
    out_of_range.graph.node[1].input.append("columns")
    out_of_range.graph.node[1].attribute.append(
        helper.make_attribute("axis", 1))
    yield "gather out of range", out_of_range, [
        "node '/act' (Gather, opset 17)",
        "index 3 is outside the 3 entries of axis 1"]
    # Noise that is no Bernoulli mask: mpc draws only dropout's.
    noisy = linear_model(op="Mul")
    noisy.graph.node.insert(1, helper.make_node(
        "RandomUniformLike", ["h"], ["noise"], name="/noise"))
    noisy.graph.node[2].input.append("noise")
    yield "uniform noise", noisy, [
        "node '/noise' (RandomUniformLike, opset 17)",
        "a random draw other than a Bernoulli mask"]
    undefined = linear_model()
    undefined.graph.node[1].input[0] = "nowhere"
    yield "undefined input", undefined, ["the ONNX checker rejects it"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    # The good model imports, so each failure below is the case's own.
    good = os.path.join(args.work, "good.onnx")
    onnx.save(linear_model(), good)
    result = subprocess.run([args.mpc, "import", good], capture_output=True,
                            text=True)
    if result.returncode != 0 or "mpc.linear" not in result.stdout:
        sys.exit(f"FAIL: the good model does not import:\n{result.stderr}")

    failures = 0
    for name, model, expected in cases(args.work):
        path = os.path.join(args.work, name.replace(" ", "_") + ".onnx")
        with open(path, "wb") as file:
            file.write(model if isinstance(model, bytes)
                       else model.SerializeToString())
        result = subprocess.run([args.mpc, "import", path, "-o",
                                 path + ".mlir"], capture_output=True,
                                text=True)
        message = result.stderr.strip()
        problems = []
        if result.returncode != 1:
            problems.append(f"exit code {result.returncode}, expected 1")
        if not message.startswith("mpc import: error: " + path):
            problems.append("the message does not start with "
                            "'mpc import: error: <file>'")
        problems += [f"no '{text}'" for text in expected if text not in message]
        if os.path.exists(path + ".mlir"):
            problems.append("an output file was written")
        status = "FAIL" if problems else "ok"
        print(f"{status}: {name}: {message}")
        for problem in problems:
            print(f"    {problem}")
        failures += bool(problems)
    if failures:
        sys.exit(f"FAIL: {failures} case(s)")
    print("PASS")


if __name__ == "__main__":
    main()
