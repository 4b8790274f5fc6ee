"""Writes small ONNX graphs for tests/Driver/import.test into the directory
given: each is a decomposition that torch.onnx.export (opset 17) writes,
behind a Gemm with a parameter, ending in a mean (the loss)."""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, value):
    return helper.make_node("Constant", [], [name], name=f"/{name}",
                            value=numpy_helper.from_array(np.array(value, np.float32)))


def iconst(name, value):
    return helper.make_node("Constant", [], [name], name=f"/{name}",
                            value=numpy_helper.from_array(np.array(value, np.int64)))


def model(path, body, outputs=("y",), extra_inits=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "fc.weight")
    nodes = [helper.make_node("Gemm", ["x", "fc.weight"], ["h"], name="/fc/Gemm",
                              transB=1)]
    nodes += body
    nodes.append(helper.make_node("ReduceMean", [outputs[0]], ["loss"],
                                  name="/mean", keepdims=0))
    graph = helper.make_graph(nodes, "g", [x], [loss], [w, *extra_inits])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              path)


def main(directory):
    os.makedirs(directory, exist_ok=True)
    n = helper.make_node
    model(os.path.join(directory, "gelu_erf.onnx"), [
        const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5),
        n("Div", ["h", "sqrt2"], ["d"], name="/Div"),
        n("Erf", ["d"], ["e"], name="/Erf"),
        n("Add", ["e", "one"], ["a"], name="/Add"),
        n("Mul", ["h", "a"], ["m"], name="/Mul"),
        n("Mul", ["m", "half"], ["y"], name="/Mul_1")])
    model(os.path.join(directory, "gelu_tanh.onnx"), [
        const("c", 0.044715), const("k", 0.7978846), const("one", 1.0),
        const("half", 0.5),
        n("Mul", ["h", "h"], ["sq"], name="/Mul"),
        n("Mul", ["h", "sq"], ["cube"], name="/Mul_1"),
        n("Mul", ["c", "cube"], ["sc"], name="/Mul_2"),
        n("Add", ["h", "sc"], ["s"], name="/Add"),
        n("Mul", ["k", "s"], ["i"], name="/Mul_3"),
        n("Tanh", ["i"], ["t"], name="/Tanh"),
        n("Add", ["one", "t"], ["p"], name="/Add_1"),
        n("Mul", ["h", "p"], ["q"], name="/Mul_4"),
        n("Mul", ["half", "q"], ["y"], name="/Mul_5")])
    model(os.path.join(directory, "silu.onnx"), [
        n("Sigmoid", ["h"], ["s"], name="/Sigmoid"),
        n("Mul", ["h", "s"], ["y"], name="/Mul")])
    model(os.path.join(directory, "rms_norm.onnx"), [
        const("two", 2.0), const("eps", 1e-6), const("one", 1.0),
        n("Pow", ["h", "two"], ["p"], name="/norm/Pow"),
        n("ReduceMean", ["p"], ["m"], name="/norm/ReduceMean", axes=[-1], keepdims=1),
        n("Add", ["m", "eps"], ["a"], name="/norm/Add"),
        n("Sqrt", ["a"], ["r"], name="/norm/Sqrt"),
        n("Div", ["one", "r"], ["i"], name="/norm/Div"),
        n("Mul", ["h", "i"], ["hn"], name="/norm/Mul"),
        n("Mul", ["hn", "norm.weight"], ["y"], name="/norm/Mul_1")],
        extra_inits=[numpy_helper.from_array(np.ones(8, np.float32), "norm.weight")])
    # nn.ReLU6 and torch.clamp(min=...): Clip with constant bounds.
    model(os.path.join(directory, "relu6.onnx"), [
        const("zero", 0.0), const("six", 6.0),
        n("Clip", ["h", "zero", "six"], ["c"], name="/relu6/Clip"),
        n("Clip", ["c", "zero"], ["y"], name="/clamp/Clip")])
    # nn.Hardswish and nn.Hardsigmoid (alpha 1/6 as torch exports it).
    model(os.path.join(directory, "hardswish.onnx"), [
        n("HardSwish", ["h"], ["s"], name="/act/HardSwish"),
        n("HardSigmoid", ["s"], ["y"], name="/gate/HardSigmoid",
          alpha=1.0 / 6.0)])
    # Shapes computed from shapes, as x.view(x.size(0), 2, -1) and
    # nn.MultiheadAttention's split of its packed projection write them:
    # ONNX shape inference without data propagation leaves the Slice and the
    # Reshape unshaped; the importer's constant evaluator works them out.
    model(os.path.join(directory, "shape_chain.onnx"), [
        iconst("zero", 0), iconst("one", 1), iconst("two", 2),
        iconst("axes0", [0]), iconst("axes1", [1]), iconst("starts", [0]),
        iconst("pair", [2]), iconst("rest", [-1]),
        n("Shape", ["h"], ["s"], name="/Shape"),
        n("Gather", ["s", "zero"], ["rows"], name="/Gather", axis=0),
        n("Gather", ["s", "one"], ["width"], name="/Gather_1", axis=0),
        n("Div", ["width", "two"], ["half"], name="/Div"),
        n("Unsqueeze", ["half", "axes0"], ["ends"], name="/Unsqueeze"),
        n("Slice", ["h", "starts", "ends", "axes1"], ["q"], name="/Slice"),
        n("Unsqueeze", ["rows", "axes0"], ["rows1"], name="/Unsqueeze_1"),
        n("Concat", ["rows1", "pair", "rest"], ["shape"], name="/Concat",
          axis=0),
        n("Reshape", ["q", "shape"], ["y"], name="/Reshape")])
    # Constant indices: ViT's class token x[:, 0] and a picked list.
    model(os.path.join(directory, "gather_constant.onnx"), [
        iconst("tokens", [4, 2, 4]), iconst("first", 0),
        iconst("picked", [6, 7, 0]),
        n("Reshape", ["h", "tokens"], ["t"], name="/Reshape"),
        n("Gather", ["t", "first"], ["cls"], name="/Gather", axis=1),
        n("Gather", ["h", "picked"], ["some"], name="/Gather_1", axis=1),
        n("Concat", ["cls", "some"], ["y"], name="/Concat", axis=1)])
    # table[index] with an index of many runs (Swin's relative position
    # bias): a one-hot GEMM.
    model(os.path.join(directory, "gather_rows.onnx"), [
        iconst("rows", [3, 1, 3, 1, 3, 1, 3, 1, 3, 1]),
        n("Gather", ["h", "rows"], ["y"], name="/Gather", axis=0)])
    # The constant evaluator's integer arithmetic: x[..., ::-1] of a shape
    # (the exporter's INT64_MIN end), x[:, 2:] (INT64_MAX), Mod as Swin pads
    # to its window, and a mask written region by region (ScatterND).
    big = np.iinfo(np.int64)
    model(os.path.join(directory, "constant_ops.onnx"), [
        iconst("last", [-1]), iconst("first", [big.min]), iconst("back", [-1]),
        iconst("axis0", [0]), iconst("two", [2]), iconst("open", [big.max]),
        iconst("axis1", [1]), iconst("window", [3, 5]),
        iconst("rows", [[1], [3]]),
        helper.make_node("Constant", [], ["zeros"], name="/zeros",
                         value=numpy_helper.from_array(np.zeros((4, 6), np.float32))),
        helper.make_node("Constant", [], ["ones"], name="/ones",
                         value=numpy_helper.from_array(np.ones((2, 6), np.float32))),
        n("Shape", ["h"], ["s"], name="/Shape"),
        n("Slice", ["s", "last", "first", "axis0", "back"], ["flipped"],
          name="/Slice"),
        n("Mod", ["flipped", "window"], ["rest"], name="/Mod"),
        n("Slice", ["h", "two", "open", "axis1"], ["tail"], name="/Slice_1"),
        n("ScatterND", ["zeros", "rows", "ones"], ["mask"], name="/ScatterND"),
        n("Add", ["tail", "mask"], ["masked"], name="/Add"),
        # flipped = [8, 4]; rest = [8 % 3, 4 % 5] = [2, 4]: [2, 4, 3].
        n("Concat", ["rest", "back"], ["target"], name="/Concat", axis=0),
        n("Reshape", ["masked", "target"], ["y"], name="/Reshape")])
    # nn.Dropout(0.3) exported in training mode, and in evaluation mode.
    for mode, training in (("train", True), ("eval", False)):
        model(os.path.join(directory, f"dropout_{mode}.onnx"), [
            const("ratio", 0.3),
            helper.make_node("Constant", [], ["training"], name="/training",
                             value=numpy_helper.from_array(np.array(training))),
            n("Dropout", ["h", "ratio", "training"], ["y", "mask"],
              name="/drop/Dropout")])
    # Stochastic depth's per-sample mask as torch.bernoulli exports it:
    # h * Cast(Less(RandomUniformLike(P), P)) / 0.8, P = full([4, 1], 0.8).
    survival = numpy_helper.from_array(np.full((4, 1), 0.8, np.float32))
    model(os.path.join(directory, "stochastic_depth.onnx"), [
        helper.make_node("Constant", [], ["p"], name="/full", value=survival),
        const("survival", 0.8),
        n("RandomUniformLike", ["p"], ["u"], name="/RandomUniformLike",
          dtype=TensorProto.FLOAT, low=0.0, high=1.0),
        n("Less", ["u", "p"], ["b"], name="/Less"),
        n("Cast", ["b"], ["mask"], name="/Cast", to=TensorProto.FLOAT),
        n("Mul", ["h", "mask"], ["m"], name="/Mul"),
        n("Div", ["m", "survival"], ["y"], name="/Div")])
    # Cross-entropy as F.nll_loss(F.log_softmax(h)) writes it.
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [4])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    graph = helper.make_graph([
        n("Gemm", ["x", "fc.weight"], ["h"], name="/fc/Gemm", transB=1),
        n("LogSoftmax", ["h"], ["p"], name="/LogSoftmax", axis=1),
        n("NegativeLogLikelihoodLoss", ["p", "y"], ["loss"], name="/nll",
          reduction="mean", ignore_index=-100)],
        "g", [x, y], [loss],
        [numpy_helper.from_array(np.ones((8, 8), np.float32), "fc.weight")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(directory, "nll.onnx"))
    # A linear layer on a 3-d input: Transpose(W), MatMul, Add(b).
    x3 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    graph = helper.make_graph([
        n("Transpose", ["proj.weight"], ["wt"], name="/proj/Transpose", perm=[1, 0]),
        n("MatMul", ["x", "wt"], ["mm"], name="/proj/MatMul"),
        n("Add", ["proj.bias", "mm"], ["y"], name="/proj/Add"),
        n("ReduceMean", ["y"], ["loss"], name="/mean", keepdims=0)],
        "g", [x3], [loss],
        [numpy_helper.from_array(np.ones((6, 8), np.float32), "proj.weight"),
         numpy_helper.from_array(np.zeros(6, np.float32), "proj.bias")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(directory, "linear_3d.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
