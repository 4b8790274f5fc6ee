//===- Recognisers.cpp - the exporter's decompositions, recognised --------===//
//
// The decompositions torch.onnx.export writes, recognised back into mpc
// ops: GELU, SiLU, RMSNorm, layer norm (before opset 17), the mean squared
// error, cross-entropy, linear, attention's k^T, and Bernoulli masks (as
// mpc's dropout).
//
// Compiled with exceptions, as the rest of the importer: libonnx reports
// through them.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;

namespace mlir::mpc::onnx_import {

//===----------------------------------------------------------------------===//
// Decompositions the exporter writes, recognised back
//===----------------------------------------------------------------------===//

std::optional<LogicalResult> Importer::recognise(int index) {
  const NodeProto &node = graph.node(index);
  const std::string &type = node.op_type();
  auto out = [](const NodeProto *n) -> const std::string & {
    return n->output(0);
  };
  auto scalarOf = [&](const NodeProto *n, const std::string &input) {
    return scalar(otherInput(*n, input));
  };

  // GELU, exact: x * (1 + erf(x / sqrt(2))) * 0.5.
  if ((type == "Div" && near(scalar(node.input(1)), M_SQRT2)) ||
      (type == "Mul" && near(scalarOf(&node, node.input(0)), M_SQRT1_2))) {
    const std::string &x = node.input(0);
    const NodeProto *erf = soleConsumer(out(&node));
    const NodeProto *plusOne =
        isOp(erf, "Erf") ? soleConsumer(out(erf)) : nullptr;
    const NodeProto *times =
        isOp(plusOne, "Add") && near(scalarOf(plusOne, out(erf)), 1.0)
            ? soleConsumer(out(plusOne))
            : nullptr;
    const NodeProto *half =
        isOp(times, "Mul") && otherInput(*times, out(plusOne)) == x
            ? soleConsumer(out(times))
            : nullptr;
    if (isOp(half, "Mul") && near(scalarOf(half, out(times)), 0.5)) {
      Value input = operand(node, 0);
      if (!input)
        return failure();
      values[out(half)] =
          mpc::GeluOp::create(builder, location, input.getType(), input,
                              mpc::GeluApproximation::Erf);
      recognised(values[out(half)], "gelu", node, {erf, plusOne, times, half});
      return success();
    }
  }

  // GELU, tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
  if (type == "Mul" && node.input_size() == 2 &&
      node.input(0) == node.input(1)) {
    const std::string &x = node.input(0);
    const NodeProto *cube = soleConsumer(out(&node));
    bool ok = isOp(cube, "Mul") && otherInput(*cube, out(&node)) == x;
    const NodeProto *scaled = ok ? soleConsumer(out(cube)) : nullptr;
    ok = isOp(scaled, "Mul") && near(scalarOf(scaled, out(cube)), 0.044715);
    const NodeProto *sum = ok ? soleConsumer(out(scaled)) : nullptr;
    ok = isOp(sum, "Add") && otherInput(*sum, out(scaled)) == x;
    const NodeProto *inner = ok ? soleConsumer(out(sum)) : nullptr;
    ok = isOp(inner, "Mul") &&
         near(scalarOf(inner, out(sum)), std::sqrt(2.0 / M_PI));
    const NodeProto *tanh = ok ? soleConsumer(out(inner)) : nullptr;
    ok = isOp(tanh, "Tanh");
    const NodeProto *plusOne = ok ? soleConsumer(out(tanh)) : nullptr;
    ok = isOp(plusOne, "Add") && near(scalarOf(plusOne, out(tanh)), 1.0);
    const NodeProto *times = ok ? soleConsumer(out(plusOne)) : nullptr;
    ok = isOp(times, "Mul") && otherInput(*times, out(plusOne)) == x;
    const NodeProto *half = ok ? soleConsumer(out(times)) : nullptr;
    if (ok && isOp(half, "Mul") && near(scalarOf(half, out(times)), 0.5)) {
      Value input = operand(node, 0);
      if (!input)
        return failure();
      values[out(half)] =
          mpc::GeluOp::create(builder, location, input.getType(), input,
                              mpc::GeluApproximation::Tanh);
      recognised(values[out(half)], "gelu tanh", node,
                 {cube, scaled, sum, inner, tanh, plusOne, times, half});
      return success();
    }
  }

  // SiLU: x * sigmoid(x).
  if (type == "Sigmoid") {
    const NodeProto *times = soleConsumer(out(&node));
    if (isOp(times, "Mul") && otherInput(*times, out(&node)) == node.input(0)) {
      Value input = operand(node, 0);
      if (!input)
        return failure();
      values[out(times)] =
          mpc::SiluOp::create(builder, location, input.getType(), input);
      recognised(values[out(times)], "silu", node, {times});
      return success();
    }
  }

  // RMSNorm: x * (1 / sqrt(mean(x^2, -1) + eps)) * weight, or rsqrt as
  // Reciprocal(Sqrt(.)).
  if (type == "Pow" && near(scalar(node.input(1)), 2.0)) {
    const std::string &x = node.input(0);
    const NodeProto *mean = soleConsumer(out(&node));
    std::optional<SmallVector<int64_t>> axes =
        isOp(mean, "ReduceMean") ? intsAttribute(*mean, "axes") : std::nullopt;
    auto xValue = values.find(x);
    int64_t rank =
        xValue == values.end()
            ? -1
            : cast<RankedTensorType>(xValue->second.getType()).getRank();
    bool ok = axes && axes->size() == 1 &&
              axis(axes->front(), rank) == rank - 1 &&
              intAttribute(*mean, "keepdims", 1) == 1;
    const NodeProto *plusEps = ok ? soleConsumer(out(mean)) : nullptr;
    std::optional<double> eps =
        isOp(plusEps, "Add") ? scalarOf(plusEps, out(mean)) : std::nullopt;
    const NodeProto *root = eps ? soleConsumer(out(plusEps)) : nullptr;
    const NodeProto *inverse =
        isOp(root, "Sqrt") ? soleConsumer(out(root)) : nullptr;
    ok = (isOp(inverse, "Div") && inverse->input(1) == out(root) &&
          near(scalar(inverse->input(0)), 1.0)) ||
         isOp(inverse, "Reciprocal");
    const NodeProto *normalised = ok ? soleConsumer(out(inverse)) : nullptr;
    ok = isOp(normalised, "Mul") && otherInput(*normalised, out(inverse)) == x;
    const NodeProto *weighted = ok ? soleConsumer(out(normalised)) : nullptr;
    std::string weight =
        isOp(weighted, "Mul") ? otherInput(*weighted, out(normalised)) : "";
    auto weightValue = values.find(weight);
    if (!weight.empty() && weightValue != values.end() &&
        llvm::is_contained(paramNames, weight)) {
      Value input = xValue->second;
      values[out(weighted)] = mpc::RmsNormOp::create(
          builder, location, input.getType(), input, weightValue->second,
          builder.getF64FloatAttr(asWritten(*eps)));
      recognised(values[out(weighted)], "rms_norm", node,
                 {mean, plusEps, root, inverse, normalised, weighted});
      return success();
    }
  }

  // Layer norm as opsets before 17 write it: d = x - mean(x, -1);
  // d / sqrt(mean(d^2, -1) + eps) * weight + bias.
  if (type == "ReduceMean" && intAttribute(node, "keepdims", 1) == 1 &&
      values.count(node.input(0))) {
    const std::string &x = node.input(0);
    Value input = values[x];
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    auto lastAxisMean = [&](const NodeProto *n) {
      std::optional<SmallVector<int64_t>> axes =
          isOp(n, "ReduceMean") ? intsAttribute(*n, "axes") : std::nullopt;
      return axes && axes->size() == 1 &&
             axis(axes->front(), rank) == rank - 1 &&
             intAttribute(*n, "keepdims", 1) == 1;
    };
    const NodeProto *centre = soleConsumer(out(&node));
    bool ok = lastAxisMean(&node) && isOp(centre, "Sub") &&
              centre->input(0) == x && centre->input(1) == out(&node) &&
              consumers[out(centre)].size() == 2 &&
              !graphOutputs.count(out(centre));
    const NodeProto *square = nullptr, *divide = nullptr;
    if (ok)
      for (int reader : consumers[out(centre)]) {
        const NodeProto *n = &graph.node(reader);
        if (isOp(n, "Pow") && n->input(0) == out(centre) &&
            near(scalar(n->input(1)), 2.0))
          square = n;
        else if (isOp(n, "Div") && n->input(0) == out(centre))
          divide = n;
      }
    const NodeProto *variance = square ? soleConsumer(out(square)) : nullptr;
    const NodeProto *plusEps =
        lastAxisMean(variance) ? soleConsumer(out(variance)) : nullptr;
    std::optional<double> eps =
        isOp(plusEps, "Add") ? scalarOf(plusEps, out(variance)) : std::nullopt;
    const NodeProto *root = eps ? soleConsumer(out(plusEps)) : nullptr;
    ok = divide && isOp(root, "Sqrt") && soleConsumer(out(root)) == divide &&
         divide->input(1) == out(root);
    const NodeProto *scaled = ok ? soleConsumer(out(divide)) : nullptr;
    std::string weight =
        isOp(scaled, "Mul") ? otherInput(*scaled, out(divide)) : "";
    const NodeProto *shifted = llvm::is_contained(paramNames, weight)
                                   ? soleConsumer(out(scaled))
                                   : nullptr;
    std::string bias =
        isOp(shifted, "Add") ? otherInput(*shifted, out(scaled)) : "";
    if (llvm::is_contained(paramNames, bias)) {
      values[out(shifted)] = mpc::LayerNormOp::create(
          builder, location, input.getType(), input, values[weight],
          values[bias], builder.getF64FloatAttr(asWritten(*eps)));
      recognised(
          values[out(shifted)], "layer_norm", node,
          {centre, square, variance, plusEps, root, divide, scaled, shifted});
      return success();
    }
  }

  // Cross-entropy written as log_softmax + nll_loss (mean).
  if (type == "LogSoftmax") {
    const NodeProto *loss = soleConsumer(out(&node));
    auto logits = values.find(node.input(0));
    if (isOp(loss, "NegativeLogLikelihoodLoss") &&
        loss->input(0) == out(&node) && logits != values.end() &&
        stringAttribute(*loss, "reduction", "mean") == "mean" &&
        loss->input_size() == 2 && loss->output_size() == 1) {
      auto type = cast<RankedTensorType>(logits->second.getType());
      auto targets = values.find(loss->input(1));
      if (type.getRank() == 2 && axis(intAttribute(node, "axis", -1), 2) == 1 &&
          targets != values.end()) {
        const onnx::AttributeProto *ignore =
            findAttribute(*loss, "ignore_index");
        values[out(loss)] = mpc::CrossEntropyOp::create(
            builder, location, RankedTensorType::get({}, builder.getF32Type()),
            logits->second, targets->second,
            ignore ? builder.getI64IntegerAttr(ignore->i()) : IntegerAttr());
        recognised(values[out(loss)], "cross_entropy", node, {loss});
        return success();
      }
    }
  }

  // Mean squared error: mean((a - b)^2) over everything.
  if (type == "Sub") {
    const NodeProto *square = soleConsumer(out(&node));
    bool ok = (isOp(square, "Pow") && square->input(0) == out(&node) &&
               near(scalar(square->input(1)), 2.0)) ||
              (isOp(square, "Mul") && square->input(0) == out(&node) &&
               square->input(1) == out(&node));
    const NodeProto *mean = ok ? soleConsumer(out(square)) : nullptr;
    if (isOp(mean, "ReduceMean") && intAttribute(*mean, "keepdims", 1) == 0 &&
        !intsAttribute(*mean, "axes")) {
      Value lhs = operand(node, 0), rhs = operand(node, 1);
      if (!lhs || !rhs)
        return failure();
      if (lhs.getType() == rhs.getType()) {
        values[out(mean)] = mpc::MseLossOp::create(
            builder, location, RankedTensorType::get({}, builder.getF32Type()),
            lhs, rhs);
        recognised(values[out(mean)], "mse_loss", node, {square, mean});
        return success();
      }
    }
  }

  // Linear: Transpose(W) feeding MatMul(x, W^T) (+ b), W a [N, K] parameter.
  if (type == "Transpose" && llvm::is_contained(paramNames, node.input(0)) &&
      intsAttribute(node, "perm") == SmallVector<int64_t>{1, 0}) {
    const NodeProto *matmul = soleConsumer(out(&node));
    if (isOp(matmul, "MatMul") && matmul->input(1) == out(&node) &&
        values.count(matmul->input(0))) {
      Value input = values[matmul->input(0)];
      Value weight = values[node.input(0)];
      const NodeProto *plusBias = soleConsumer(out(matmul));
      std::string bias =
          isOp(plusBias, "Add") ? otherInput(*plusBias, out(matmul)) : "";
      Value biasValue;
      if (!bias.empty() && llvm::is_contained(paramNames, bias) &&
          cast<RankedTensorType>(values[bias].getType()).getRank() == 1)
        biasValue = values[bias];
      const NodeProto *last = biasValue ? plusBias : matmul;
      RankedTensorType type = resultType(*last);
      if (!type)
        return failure();
      values[out(last)] = mpc::LinearOp::create(builder, location, type, input,
                                                weight, biasValue);
      if (biasValue)
        recognised(values[out(last)], "linear", node, {matmul, plusBias});
      else
        recognised(values[out(last)], "linear", node, {matmul});
      return success();
    }
  }

  // k^T for attention: Transpose([0, 2, 3, 1]) of [B, T, H, D] feeding a
  // MatMul as its right operand is the head transpose read transposed.
  if (type == "Transpose" &&
      intsAttribute(node, "perm") == SmallVector<int64_t>{0, 2, 3, 1} &&
      values.count(node.input(0))) {
    const NodeProto *matmul = soleConsumer(out(&node));
    if (isOp(matmul, "MatMul") && matmul->input(1) == out(&node) &&
        values.count(matmul->input(0))) {
      Value key = values[node.input(0)];
      auto keyType = cast<RankedTensorType>(key.getType());
      ArrayRef<int64_t> s = keyType.getShape();
      auto headType = RankedTensorType::get({s[0], s[2], s[1], s[3]},
                                            keyType.getElementType());
      Value heads =
          mpc::TransposeOp::create(builder, location, headType, key,
                                   builder.getDenseI64ArrayAttr({0, 2, 1, 3}));
      RankedTensorType type = resultType(*matmul);
      if (!type)
        return failure();
      Location matmulLoc = locationOf(indexOf(matmul));
      values[out(matmul)] = mpc::BatchMatmulOp::create(
          builder, matmulLoc, type, values[matmul->input(0)], heads,
          /*transpose_lhs=*/false, /*transpose_rhs=*/true);
      done[indexOf(matmul)] = true;
      return success();
    }
  }
  // A Bernoulli mask of constant probability p, as torch.bernoulli(P) and
  // `torch.rand_like(P) < p` export it, Cast(Less(RandomUniformLike(P), P)),
  // or ONNX's own Bernoulli(P): stochastic depth's per-sample mask. mpc
  // draws it as its dropout of ones at rate 1 - p (0 or 1/p, the mask
  // regenerated in the backward pass from the seed and the step) times p.
  if (type == "RandomUniformLike" || type == "Bernoulli") {
    const NodeProto *less = nullptr, *toFloat = nullptr;
    const Constant *probabilities = nullptr;
    if (type == "RandomUniformLike") {
      less = soleConsumer(out(&node));
      if (isOp(less, "Less") && less->input(0) == out(&node) &&
          floatAttribute(node, "low", 0) == 0 &&
          floatAttribute(node, "high", 1) == 1)
        probabilities = constant(less->input(1));
      toFloat = probabilities ? soleConsumer(out(less)) : nullptr;
      if (!isOp(toFloat, "Cast") ||
          intAttribute(*toFloat, "to", 0) != TensorProto::FLOAT)
        return fail(node, "a random draw other than a Bernoulli mask "
                          "(Cast(Less(RandomUniformLike(P), P)) with P a "
                          "constant) is not supported");
    } else {
      probabilities = constant(node.input(0));
      if (!probabilities ||
          intAttribute(node, "dtype", TensorProto::FLOAT) != TensorProto::FLOAT)
        return fail(node, "a Bernoulli draw needs constant FLOAT "
                          "probabilities");
    }
    double p = probabilities->values.empty()
                   ? 0
                   : asWritten(probabilities->values.front());
    if (llvm::any_of(probabilities->values,
                     [&](double value) { return asWritten(value) != p; }) ||
        !(p >= 0 && p <= 1))
      return fail(node, "a Bernoulli mask needs one probability in [0, 1] "
                        "for every element (mpc draws it as a dropout)");
    SmallVector<int64_t> shape(probabilities->shape);
    Value mask;
    if (p == 0 || p == 1) {
      mask =
          floatConstant(shape, SmallVector<double>(probabilities->size(), p));
    } else {
      Value ones =
          floatConstant(shape, SmallVector<double>(probabilities->size(), 1));
      Value kept = mpc::DropoutOp::create(
          builder, location, ones.getType(), ones,
          builder.getF64FloatAttr(asWritten(1 - p)), IntegerAttr());
      mask = mpc::ScaleOp::create(builder, location, ones.getType(), kept,
                                  builder.getF64FloatAttr(p));
    }
    const NodeProto &last = toFloat ? *toFloat : node;
    values[out(&last)] = mask;
    if (toFloat)
      recognised(mask, "bernoulli", node, {less, toFloat});
    else
      done[index] = true;
    return success();
  }
  return std::nullopt;
}

} // namespace mlir::mpc::onnx_import
