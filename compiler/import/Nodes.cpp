//===- Nodes.cpp - single ONNX nodes as mpc ops ---------------------------===//
//
// Each node the recognisers and the constant evaluator left, translated
// on its own: by op type to the mpc op of the same meaning, or an error
// naming the node.
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

using namespace mlir;

namespace mlir::mpc::onnx_import {

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

LogicalResult Importer::translateNode(int index) {
  const NodeProto &node = graph.node(index);
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return fail(node, "the operator domain '" + node.domain() +
                          "' is not supported (only the default ONNX domain)");
  if (std::optional<LogicalResult> recognised = recognise(index))
    return *recognised;

  const std::string &type = node.op_type();
  auto unary = [&](auto tag) -> LogicalResult {
    using Op = decltype(tag);
    Value input = operand(node, 0);
    if (!input)
      return failure();
    define(node, Op::create(builder, location, input));
    return success();
  };
  if (type == "Relu")
    return unary(mpc::ReluOp());
  if (type == "Tanh")
    return unary(mpc::TanhOp());
  if (type == "Sigmoid")
    return unary(mpc::SigmoidOp());
  if (type == "Exp")
    return unary(mpc::ExpOp());
  if (type == "Log")
    return unary(mpc::LogOp());
  if (type == "Sqrt")
    return unary(mpc::SqrtOp());
  if (type == "Neg")
    return unary(mpc::NegOp());
  if (type == "Shape")
    return fail(node, "the shape of '" + node.input(0) +
                          "' is not static; mpc needs static shapes");
  if (type == "Pad") {
    // What torch.onnx writes before an average pool (DenseNet's
    // transitions): a constant Pad of zeros everywhere, which moves nothing.
    const Constant *pads =
        node.input_size() > 1 ? constant(node.input(1)) : nullptr;
    bool zeros = node.input_size() < 3 || node.input(2).empty() ||
                 scalar(node.input(2)) == 0.0;
    // Inception's avg_pool2d(x, 3, stride=1, padding=1), which counts the
    // padding, is exported as a Pad of zeros and an unpadded AveragePool:
    // mpc's avg_pool2d with that padding.
    const NodeProto *pool = soleConsumer(node.output(0));
    if (stringAttribute(node, "mode", "constant") == "constant" && pads &&
        zeros && isOp(pool, "AveragePool") &&
        pool->input(0) == node.output(0) && pads->size() == 8 &&
        llvm::any_of(pads->values, [](double pad) { return pad != 0; }))
      return translatePool(*pool, &node);
    if (stringAttribute(node, "mode", "constant") != "constant" || !pads ||
        llvm::any_of(pads->values, [](double pad) { return pad != 0; }))
      return unsupported(node, "Pad other than by zero elements (mpc pads "
                               "only inside conv2d and pooling)");
    Value input = operand(node, 0);
    if (!input)
      return failure();
    define(node, input);
    return success();
  }
  if (type == "Clip")
    return translateClip(node);
  if (type == "HardSigmoid" || type == "HardSwish")
    return translateHardSigmoid(node);
  if (type == "Identity" ||
      (type == "Cast" && intAttribute(node, "to", 0) == TensorProto::FLOAT)) {
    Value input = operand(node, 0);
    if (!input)
      return failure();
    if (!getElementTypeOrSelf(input.getType()).isF32())
      return fail(node, "a cast of a non-f32 value is not supported");
    define(node, input);
    return success();
  }
  if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" ||
      type == "Pow" || type == "Reciprocal")
    return translateBinary(node);
  if (type == "MatMul")
    return translateMatMul(node);
  if (type == "Gemm")
    return translateGemm(node);
  if (type == "Reshape" || type == "Flatten" || type == "Squeeze" ||
      type == "Unsqueeze" || type == "Transpose" || type == "Expand")
    return translateReshapeLike(node);
  if (type == "Slice")
    return translateSlice(node);
  if (type == "Split")
    return translateSplit(node);
  if (type == "Concat") {
    SmallVector<Value> inputs;
    for (int i = 0; i < node.input_size(); ++i) {
      inputs.push_back(operand(node, i));
      if (!inputs.back())
        return failure();
    }
    int64_t rank = cast<RankedTensorType>(inputs[0].getType()).getRank();
    RankedTensorType type = resultType(node);
    if (!type)
      return failure();
    define(node,
           mpc::ConcatOp::create(builder, location, type, inputs,
                                 axis(intAttribute(node, "axis", 0), rank)));
    return success();
  }
  if (type == "Gather")
    return translateGather(node);
  if (type == "Where")
    return translateWhere(node);
  if (type == "Softmax" || type == "LogSoftmax") {
    Value input = operand(node, 0);
    if (!input)
      return failure();
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    int64_t dim = axis(intAttribute(node, "axis", -1), rank);
    if (type == "Softmax")
      define(node, mpc::SoftmaxOp::create(builder, location, input.getType(),
                                          input, dim));
    else
      define(node, mpc::LogSoftmaxOp::create(builder, location, input.getType(),
                                             input, dim));
    return success();
  }
  if (type == "Conv")
    return translateConv(node);
  if (type == "MaxPool" || type == "AveragePool" || type == "GlobalAveragePool")
    return translatePool(node);
  if (type == "BatchNormalization")
    return translateBatchNorm(node);
  if (type == "LayerNormalization")
    return translateLayerNorm(node);
  if (type == "ReduceMean" || type == "ReduceSum" || type == "ReduceMax")
    return translateReduce(node);
  if (type == "SoftmaxCrossEntropyLoss")
    return translateCrossEntropy(node);
  if (type == "Dropout") {
    Value input = operand(node, 0);
    if (!input)
      return failure();
    std::optional<double> ratio =
        node.input_size() > 1 && !node.input(1).empty() ? scalar(node.input(1))
                                                        : 0.5;
    std::optional<double> training =
        node.input_size() > 2 && !node.input(2).empty() ? scalar(node.input(2))
                                                        : 0.0;
    if (!ratio || !training)
      return fail(node, "ratio and training_mode must be constants");
    if (node.output_size() > 1 && consumers.count(node.output(1)))
      return fail(node, "the dropout mask output is read; mpc has no mask "
                        "output");
    if (*training == 0 || *ratio == 0)
      define(node, input);
    else
      define(node,
             mpc::DropoutOp::create(builder, location, input.getType(), input,
                                    builder.getF64FloatAttr(asWritten(*ratio)),
                                    IntegerAttr()));
    return success();
  }
  if (type == "Erf")
    return fail(node, "Erf outside GELU's x * 0.5 * (1 + erf(x / sqrt(2))) "
                      "is not supported (mpc has gelu, not erf)");
  return unsupported(node, "the operator " + type);
}

//===----------------------------------------------------------------------===//
// Single nodes
//===----------------------------------------------------------------------===//

LogicalResult Importer::translateBinary(const NodeProto &node) {
  const std::string &type = node.op_type();
  if (type == "Reciprocal") {
    Value input = operand(node, 0);
    if (!input)
      return failure();
    Value one = floatConstant({}, {1.0});
    define(node,
           mpc::DivOp::create(builder, location, input.getType(), one, input));
    return success();
  }
  if (type == "Pow") {
    std::optional<double> exponent = scalar(node.input(1));
    if (!exponent || *exponent != 2.0)
      return unsupported(node,
                         "Pow with an exponent other than the constant 2");
    Value input = operand(node, 0);
    if (!input)
      return failure();
    define(node, mpc::MulOp::create(builder, location, input.getType(), input,
                                    input));
    return success();
  }
  // A constant scalar factor is a scale; anything else broadcasts.
  if (type == "Mul") {
    for (int i = 0; i < 2; ++i) {
      std::optional<double> factor = scalar(node.input(i));
      if (factor && values.count(node.input(1 - i))) {
        Value input = values[node.input(1 - i)];
        define(node,
               mpc::ScaleOp::create(builder, location, input.getType(), input,
                                    builder.getF64FloatAttr(*factor)));
        return success();
      }
    }
  }
  Value lhs = operand(node, 0), rhs = operand(node, 1);
  if (!lhs || !rhs)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  if (type == "Add")
    define(node, mpc::AddOp::create(builder, location, result, lhs, rhs));
  else if (type == "Sub")
    define(node, mpc::SubOp::create(builder, location, result, lhs, rhs));
  else if (type == "Mul")
    define(node, mpc::MulOp::create(builder, location, result, lhs, rhs));
  else
    define(node, mpc::DivOp::create(builder, location, result, lhs, rhs));
  return success();
}

/// Clip (ReLU6, hardtanh, torch.clamp): its bounds are constant inputs
/// from opset 11 on, attributes before; a bound left out is none.
LogicalResult Importer::translateClip(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  FloatAttr bounds[2];
  for (int i = 0; i < 2; ++i) {
    const char *name = i == 0 ? "min" : "max";
    std::optional<double> bound;
    if (opset < 11) {
      if (findAttribute(node, name))
        bound = floatAttribute(node, name, 0.0);
    } else if (node.input_size() > i + 1 && !node.input(i + 1).empty()) {
      bound = scalar(node.input(i + 1));
      if (!bound)
        return unsupported(node, Twine("a ") + name +
                                     " that is not a constant scalar");
    }
    if (bound)
      bounds[i] = builder.getF64FloatAttr(asWritten(*bound));
  }
  if (!bounds[0] && !bounds[1]) {
    define(node, input);
    return success();
  }
  define(node, mpc::ClampOp::create(builder, location, input.getType(), input,
                                    bounds[0], bounds[1]));
  return success();
}

/// HardSigmoid is clamp(alpha * x + beta, 0, 1); HardSwish is x times
/// HardSigmoid with alpha 1/6 and beta 1/2 (torch.nn.Hardswish).
LogicalResult Importer::translateHardSigmoid(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  bool swish = node.op_type() == "HardSwish";
  double alpha = swish ? 1.0 / 6.0 : floatAttribute(node, "alpha", 0.2);
  double beta = swish ? 0.5 : floatAttribute(node, "beta", 0.5);
  Type type = input.getType();
  Value scaled = mpc::ScaleOp::create(builder, location, type, input,
                                      builder.getF64FloatAttr(alpha));
  Value shifted = mpc::AddOp::create(builder, location, type, scaled,
                                     floatConstant({}, {beta}));
  Value gate = mpc::ClampOp::create(builder, location, type, shifted,
                                    builder.getF64FloatAttr(0.0),
                                    builder.getF64FloatAttr(1.0));
  if (swish)
    gate = mpc::MulOp::create(builder, location, type, input, gate);
  define(node, gate);
  return success();
}

LogicalResult Importer::translateMatMul(const NodeProto &node) {
  Value lhs = operand(node, 0), rhs = operand(node, 1);
  if (!lhs || !rhs)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  if (lhsType.getRank() == 2 && rhsType.getRank() == 2) {
    define(node, mpc::MatmulOp::create(builder, location, result, lhs, rhs,
                                       false, false));
    return success();
  }
  if (lhsType.getRank() == rhsType.getRank() && lhsType.getRank() >= 3) {
    define(node, mpc::BatchMatmulOp::create(builder, location, result, lhs, rhs,
                                            false, false));
    return success();
  }
  if (rhsType.getRank() == 2 && lhsType.getRank() > 2) {
    // x [..., K] @ B [K, N] is linear(x, B^T).
    auto transposed =
        RankedTensorType::get({rhsType.getDimSize(1), rhsType.getDimSize(0)},
                              rhsType.getElementType());
    Value weight =
        mpc::TransposeOp::create(builder, location, transposed, rhs,
                                 builder.getDenseI64ArrayAttr({1, 0}));
    define(node, mpc::LinearOp::create(builder, location, result, lhs, weight,
                                       Value()));
    return success();
  }
  return unsupported(node, "MatMul of ranks " + Twine(lhsType.getRank()) +
                               " and " + Twine(rhsType.getRank()));
}

LogicalResult Importer::translateGemm(const NodeProto &node) {
  Value a = operand(node, 0), b = operand(node, 1);
  if (!a || !b)
    return failure();
  Value c;
  if (node.input_size() > 2 && !node.input(2).empty()) {
    c = operand(node, 2);
    if (!c)
      return failure();
  }
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  bool transA = intAttribute(node, "transA", 0);
  bool transB = intAttribute(node, "transB", 0);
  double alpha = floatAttribute(node, "alpha", 1.0);
  double beta = floatAttribute(node, "beta", 1.0);
  if (beta != 1.0 && c)
    return unsupported(node, "Gemm with beta != 1");
  Value product;
  auto biasType = c ? cast<RankedTensorType>(c.getType()) : RankedTensorType();
  if (!transA && transB && (!c || biasType.getRank() == 1)) {
    // nn.Linear: A [M, K], B [N, K], C [N].
    product = mpc::LinearOp::create(builder, location, result, a, b,
                                    alpha == 1.0 ? c : Value());
    if (alpha == 1.0) {
      define(node, product);
      return success();
    }
    c = biasType ? c : Value();
  } else {
    product =
        mpc::MatmulOp::create(builder, location, result, a, b, transA, transB);
  }
  if (alpha != 1.0)
    product = mpc::ScaleOp::create(builder, location, result, product,
                                   builder.getF64FloatAttr(alpha));
  if (c)
    product = mpc::AddOp::create(builder, location, result, product, c);
  define(node, product);
  return success();
}

LogicalResult Importer::translateReshapeLike(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  if (node.op_type() == "Transpose") {
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    SmallVector<int64_t> perm =
        intsAttribute(node, "perm")
            .value_or(
                llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank))));
    define(node, mpc::TransposeOp::create(builder, location, result, input,
                                          builder.getDenseI64ArrayAttr(perm)));
    return success();
  }
  if (node.op_type() == "Expand") {
    define(node, mpc::BroadcastOp::create(builder, location, result, input));
    return success();
  }
  // The extents are ONNX's inferred ones, which already resolved 0 and -1;
  // the shape operand must still be known here, else the graph is dynamic.
  if (node.op_type() == "Reshape" && !constant(node.input(1)))
    return fail(node, "the target shape is computed at run time; mpc needs "
                      "static shapes");
  define(node, mpc::ReshapeOp::create(builder, location, result, input));
  return success();
}

LogicalResult Importer::translateSlice(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t rank = inputType.getRank();
  auto ints = [&](int index) -> std::optional<SmallVector<int64_t>> {
    if (index >= node.input_size() || node.input(index).empty())
      return SmallVector<int64_t>();
    const Constant *known = constant(node.input(index));
    if (!known)
      return std::nullopt;
    return llvm::map_to_vector(known->values,
                               [](double v) { return saturatingInt64(v); });
  };
  std::optional<SmallVector<int64_t>> starts = ints(1), ends = ints(2),
                                      axes = ints(3), steps = ints(4);
  if (!starts || !ends || !axes || !steps)
    return fail(node, "starts, ends, axes and steps must be constants");
  if (axes->empty())
    *axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  if (steps->empty())
    steps->assign(axes->size(), 1);
  SmallVector<int64_t> begin(rank, 0), limit(inputType.getShape()),
      stride(rank, 1);
  for (size_t k = 0; k < axes->size(); ++k) {
    int64_t d = axis((*axes)[k], rank), extent = inputType.getDimSize(d);
    if ((*steps)[k] <= 0)
      return unsupported(node, "a slice with a step <= 0");
    int64_t s = (*starts)[k] < 0 ? (*starts)[k] + extent : (*starts)[k];
    int64_t e = (*ends)[k] < 0 ? (*ends)[k] + extent : (*ends)[k];
    begin[d] = std::clamp<int64_t>(s, 0, extent);
    limit[d] = std::clamp<int64_t>(e, 0, extent);
    stride[d] = (*steps)[k];
  }
  bool strided = llvm::any_of(stride, [](int64_t s) { return s != 1; });
  define(node,
         mpc::SliceOp::create(builder, location, result, input,
                              builder.getDenseI64ArrayAttr(begin),
                              builder.getDenseI64ArrayAttr(limit),
                              strided ? builder.getDenseI64ArrayAttr(stride)
                                      : DenseI64ArrayAttr()));
  return success();
}

LogicalResult Importer::translateSplit(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t rank = inputType.getRank();
  int64_t d = axis(intAttribute(node, "axis", 0), rank);
  SmallVector<int64_t> begin(rank, 0), limit(inputType.getShape());
  int64_t offset = 0;
  for (int i = 0; i < node.output_size(); ++i) {
    RankedTensorType result = resultType(node, i);
    if (!result)
      return failure();
    begin[d] = offset;
    limit[d] = offset + result.getDimSize(d);
    offset = limit[d];
    define(node,
           mpc::SliceOp::create(builder, location, result, input,
                                builder.getDenseI64ArrayAttr(begin),
                                builder.getDenseI64ArrayAttr(limit),
                                DenseI64ArrayAttr()),
           i);
  }
  return success();
}

/// Above this many runs of consecutive constant indices, a Gather of rows
/// is a one-hot GEMM rather than slices.
static constexpr size_t kMaxGatherSlices = 8;

LogicalResult Importer::translateGather(const NodeProto &node) {
  Value table = operand(node, 0);
  if (!table)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  auto tableType = cast<RankedTensorType>(table.getType());
  int64_t rank = tableType.getRank();
  int64_t along = axis(intAttribute(node, "axis", 0), rank);
  // Constant indices (ViT's class token x[:, 0], a position embedding of
  // arange) are slices: one for a run of consecutive indices, else one per
  // index joined along the axis.
  if (const Constant *indices = constant(node.input(1))) {
    if (indices->shape.size() > 1)
      return unsupported(node, "Gather of constant indices of rank " +
                                   Twine(indices->shape.size()) +
                                   " (only a scalar or a list)");
    if (indices->size() == 0)
      return unsupported(node, "Gather of no indices");
    int64_t extent = tableType.getDimSize(along);
    SmallVector<int64_t> picked;
    for (double index : indices->values) {
      int64_t i = saturatingInt64(index);
      if (i < -extent || i >= extent)
        return fail(node, "index " + Twine(i) + " is outside the " +
                              Twine(extent) + " entries of axis " +
                              Twine(along));
      picked.push_back(i < 0 ? i + extent : i);
    }
    auto sliceOf = [&](int64_t first, int64_t count) -> Value {
      SmallVector<int64_t> starts(rank, 0), limits(tableType.getShape());
      SmallVector<int64_t> shape(tableType.getShape());
      starts[along] = first;
      limits[along] = first + count;
      shape[along] = count;
      return mpc::SliceOp::create(
          builder, location,
          RankedTensorType::get(shape, tableType.getElementType()), table,
          builder.getDenseI64ArrayAttr(starts),
          builder.getDenseI64ArrayAttr(limits), DenseI64ArrayAttr());
    };
    SmallVector<std::pair<int64_t, int64_t>> runs; // (first, count)
    for (size_t i = 0; i < picked.size();) {
      size_t end = i + 1;
      while (end < picked.size() && picked[end] == picked[end - 1] + 1)
        ++end;
      runs.push_back({picked[i], end - i});
      i = end;
    }
    // Many runs (Swin's relative position bias, table[index] with a
    // constant index of window^4 entries): rows picked by a constant one-hot
    // matrix, one GEMM whose backward is the scatter-add, not a slice per
    // run (the generated code would grow with the index count).
    if (runs.size() > kMaxGatherSlices && rank == 2 && along == 0) {
      int64_t rows = picked.size();
      SmallVector<double> oneHot(rows * extent, 0.0);
      for (int64_t row = 0; row < rows; ++row)
        oneHot[row * extent + picked[row]] = 1.0;
      Value selector = floatConstant({rows, extent}, oneHot);
      Value gathered = mpc::MatmulOp::create(
          builder, location,
          RankedTensorType::get({rows, tableType.getDimSize(1)},
                                tableType.getElementType()),
          selector, table, /*transpose_lhs=*/false, /*transpose_rhs=*/false);
      if (gathered.getType() != result)
        gathered = mpc::ReshapeOp::create(builder, location, result, gathered);
      define(node, gathered);
      return success();
    }
    SmallVector<int64_t> shape(tableType.getShape());
    shape[along] = picked.size();
    SmallVector<Value> slices = llvm::map_to_vector(
        runs, [&](auto run) { return sliceOf(run.first, run.second); });
    Value gathered =
        slices.size() == 1
            ? slices[0]
            : mpc::ConcatOp::create(
                  builder, location,
                  RankedTensorType::get(shape, tableType.getElementType()),
                  slices, along);
    // A scalar index drops the axis.
    if (gathered.getType() != result)
      gathered = mpc::ReshapeOp::create(builder, location, result, gathered);
    define(node, gathered);
    return success();
  }
  if (along != 0 || rank != 2)
    return unsupported(node, "Gather of indices computed at run time other "
                             "than rows of a 2-d table (nn.Embedding)");
  auto indices = values.find(node.input(1));
  if (indices == values.end())
    return fail(node, "the indices are not defined before the node");
  define(node, mpc::EmbeddingOp::create(builder, location, result, table,
                                        indices->second));
  return success();
}

/// masked_fill with a constant mask: the causal mask, either way round.
LogicalResult Importer::translateWhere(const NodeProto &node) {
  const Constant *condition = constant(node.input(0));
  if (!condition)
    return unsupported(node, "Where with a condition computed at run time");
  if (condition->shape.size() < 2 ||
      product(ArrayRef<int64_t>(condition->shape).drop_back(2)) != 1)
    return unsupported(node, "Where with a mask other than one [T, S] matrix");
  int64_t rows = condition->shape[condition->shape.size() - 2];
  int64_t columns = condition->shape.back();
  bool causal = rows == columns, anticausal = rows == columns;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j) {
      bool set = condition->values[i * columns + j] != 0;
      causal &= set == (j <= i);
      anticausal &= set == (j > i);
    }
  if (!causal && !anticausal)
    return unsupported(node, "Where with a constant mask that is not causal "
                             "(lower-triangular)");
  Value onTrue = operand(node, 1), onFalse = operand(node, 2);
  if (!onTrue || !onFalse)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  Value mask = mpc::CausalMaskOp::create(
      builder, location,
      RankedTensorType::get({rows, columns}, builder.getI1Type()));
  if (anticausal)
    std::swap(onTrue, onFalse);
  define(node, mpc::WhereOp::create(builder, location, result, mask, onTrue,
                                    onFalse));
  return success();
}

LogicalResult Importer::translateConv(const NodeProto &node) {
  Value input = operand(node, 0), weight = operand(node, 1);
  if (!input || !weight)
    return failure();
  Value bias;
  if (node.input_size() > 2 && !node.input(2).empty() &&
      !(bias = operand(node, 2)))
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  if (cast<RankedTensorType>(input.getType()).getRank() != 4)
    return unsupported(node, "a convolution other than 2-d");
  if (stringAttribute(node, "auto_pad", "NOTSET") != "NOTSET")
    return unsupported(node, "auto_pad");
  SmallVector<int64_t> pads =
      intsAttribute(node, "pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
    return unsupported(node, "asymmetric padding");
  SmallVector<int64_t> strides =
      intsAttribute(node, "strides").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> dilations =
      intsAttribute(node, "dilations").value_or(SmallVector<int64_t>{1, 1});
  define(node, mpc::Conv2dOp::create(
                   builder, location, result, input, weight, bias,
                   builder.getDenseI64ArrayAttr(strides),
                   builder.getDenseI64ArrayAttr({pads[0], pads[1]}),
                   builder.getDenseI64ArrayAttr(dilations),
                   builder.getI64IntegerAttr(intAttribute(node, "group", 1))));
  return success();
}

LogicalResult Importer::translatePool(const NodeProto &node,
                                      const NodeProto *pad) {
  Value input = pad ? operand(*pad, 0) : operand(node, 0);
  if (!input)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  auto inputType = cast<RankedTensorType>(input.getType());
  if (inputType.getRank() != 4)
    return unsupported(node, "pooling other than 2-d");
  if (node.op_type() == "GlobalAveragePool") {
    define(node, mpc::AvgPool2dOp::create(
                     builder, location, result, input,
                     builder.getDenseI64ArrayAttr(
                         {inputType.getDimSize(2), inputType.getDimSize(3)}),
                     DenseI64ArrayAttr(), DenseI64ArrayAttr()));
    return success();
  }
  if (stringAttribute(node, "auto_pad", "NOTSET") != "NOTSET")
    return unsupported(node, "auto_pad");
  if (node.output_size() > 1 && consumers.count(node.output(1)))
    return unsupported(node, "MaxPool's indices output");
  SmallVector<int64_t> kernel =
      intsAttribute(node, "kernel_shape").value_or(SmallVector<int64_t>{});
  SmallVector<int64_t> strides =
      intsAttribute(node, "strides").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> pads =
      intsAttribute(node, "pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  SmallVector<int64_t> dilations =
      intsAttribute(node, "dilations").value_or(SmallVector<int64_t>{1, 1});
  if (kernel.size() != 2 || pads.size() != 4 || pads[0] != pads[2] ||
      pads[1] != pads[3])
    return unsupported(node, "a pooling window other than 2-d with "
                             "symmetric padding");
  if (dilations != SmallVector<int64_t>{1, 1})
    return unsupported(node, "dilated pooling");
  if (pad) {
    // [N, C, H, W] begins, then ends: zeros, then the pool's own padding.
    SmallVector<int64_t> amounts =
        llvm::map_to_vector(constant(pad->input(1))->values, [](double amount) {
          return static_cast<int64_t>(amount);
        });
    if (pads != SmallVector<int64_t>{0, 0, 0, 0} || amounts[0] || amounts[1] ||
        amounts[4] || amounts[5] || amounts[2] != amounts[6] ||
        amounts[3] != amounts[7] || 2 * amounts[2] > kernel[0] ||
        2 * amounts[3] > kernel[1])
      return unsupported(*pad, "Pad before an AveragePool other than the "
                               "same zeros on each side of H and W, at most "
                               "half the window");
    pads = {amounts[2], amounts[3], amounts[2], amounts[3]};
    done[indexOf(&node)] = true;
  }
  bool padded = pads[0] || pads[1];
  if (node.op_type() == "AveragePool" && padded && !pad &&
      !intAttribute(node, "count_include_pad", 0))
    return unsupported(node, "average pooling with padding that does not "
                             "count towards the divisor (count_include_pad="
                             "False)");
  auto kernelAttr = builder.getDenseI64ArrayAttr(kernel);
  auto strideAttr = builder.getDenseI64ArrayAttr(strides);
  auto padAttr = padded ? builder.getDenseI64ArrayAttr({pads[0], pads[1]})
                        : DenseI64ArrayAttr();
  bool ceilMode = intAttribute(node, "ceil_mode", 0);
  // ONNX before opset 19 keeps a last ceil_mode window that starts in the
  // trailing padding; PyTorch, and mpc, drop it.
  for (int d = 0; d < 2; ++d)
    if (ceilMode && result.getRank() == 4 && strides[d] > 0 &&
        result.getDimSize(2 + d) !=
            mpc::pooledExtent(inputType.getDimSize(2 + d), kernel[d],
                              strides[d], pads[d], true))
      return unsupported(node, "a ceil_mode window that starts in the "
                               "trailing padding");
  UnitAttr ceilAttr = ceilMode ? builder.getUnitAttr() : UnitAttr();
  if (node.op_type() == "MaxPool")
    define(node,
           mpc::MaxPool2dOp::create(builder, location, result, input,
                                    kernelAttr, strideAttr, padAttr, ceilAttr));
  else
    define(node,
           mpc::AvgPool2dOp::create(builder, location, result, input,
                                    kernelAttr, strideAttr, padAttr, ceilAttr));
  return success();
}

LogicalResult Importer::translateBatchNorm(const NodeProto &node) {
  if (!intAttribute(node, "training_mode", 0))
    return fail(node, "batch norm in inference mode; export with "
                      "training=torch.onnx.TrainingMode.TRAINING");
  for (int i = 1; i < node.output_size(); ++i)
    if (consumers.count(node.output(i)) || graphOutputs.count(node.output(i)))
      return unsupported(node, "reading the updated running statistics (mpc "
                               "updates the state itself)");
  for (int i = 3; i < 5; ++i)
    if (!llvm::is_contained(stateNames, node.input(i)))
      return fail(node, "the running statistics must be initializers");
  SmallVector<Value> operands;
  for (int i = 0; i < 5; ++i) {
    operands.push_back(operand(node, i));
    if (!operands.back())
      return failure();
  }
  // ONNX keeps `momentum` of the old value; PyTorch and mpc give the new.
  double momentum = asWritten(1.0 - floatAttribute(node, "momentum", 0.9));
  double eps = floatAttribute(node, "epsilon", 1e-5);
  define(node,
         mpc::BatchNormOp::create(
             builder, location, operands[0].getType(), /*stats=*/Type(),
             operands[0], operands[1], operands[2], operands[3], operands[4],
             builder.getF64FloatAttr(momentum), builder.getF64FloatAttr(eps))
             .getResult());
  return success();
}

LogicalResult Importer::translateLayerNorm(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  if (axis(intAttribute(node, "axis", -1), rank) != rank - 1)
    return unsupported(node, "layer norm over more than the last dim");
  if (node.input_size() < 3 || node.input(2).empty())
    return unsupported(node, "layer norm without a bias");
  if (node.output_size() > 1 &&
      llvm::any_of(llvm::drop_begin(node.output()), [&](const std::string &o) {
        return consumers.count(o) || graphOutputs.count(o);
      }))
    return unsupported(node, "reading layer norm's mean or inverse deviation");
  Value gamma = operand(node, 1), beta = operand(node, 2);
  if (!gamma || !beta)
    return failure();
  double eps = floatAttribute(node, "epsilon", 1e-5);
  define(node,
         mpc::LayerNormOp::create(builder, location, input.getType(), input,
                                  gamma, beta, builder.getF64FloatAttr(eps)));
  return success();
}

LogicalResult Importer::translateReduce(const NodeProto &node) {
  Value input = operand(node, 0);
  if (!input)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  std::optional<SmallVector<int64_t>> axes = intsAttribute(node, "axes");
  if (node.op_type() == "ReduceSum" && node.input_size() > 1 &&
      !node.input(1).empty()) {
    const Constant *known = constant(node.input(1));
    if (!known)
      return fail(node, "the axes must be constants");
    axes = llvm::map_to_vector(known->values,
                               [](double v) { return saturatingInt64(v); });
  }
  SmallVector<int64_t> dims;
  if (!axes || axes->empty())
    dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  else
    for (int64_t a : *axes)
      dims.push_back(axis(a, rank));
  llvm::sort(dims);
  bool keepdim = intAttribute(node, "keepdims", 1);
  const std::string &type = node.op_type();
  if (type == "ReduceMean")
    define(node, mpc::ReduceMeanOp::create(builder, location, result, input,
                                           dims, keepdim));
  else if (type == "ReduceSum")
    define(node, mpc::ReduceSumOp::create(builder, location, result, input,
                                          dims, keepdim));
  else
    define(node, mpc::ReduceMaxOp::create(builder, location, result, input,
                                          dims, keepdim));
  return success();
}

LogicalResult Importer::translateCrossEntropy(const NodeProto &node) {
  if (stringAttribute(node, "reduction", "mean") != "mean")
    return unsupported(node, "a reduction other than 'mean'");
  if (node.input_size() > 2 && !node.input(2).empty())
    return unsupported(node, "class weights");
  if (node.output_size() > 1 && consumers.count(node.output(1)))
    return unsupported(node, "reading the log-probabilities output");
  Value logits = operand(node, 0);
  auto targets = values.find(node.input(1));
  if (!logits)
    return failure();
  if (targets == values.end())
    return fail(node, "the targets must be a model input");
  // ONNX's logits are [N, C, d...]; mpc's are [..., C].
  auto logitsType = cast<RankedTensorType>(logits.getType());
  if (logitsType.getRank() != 2)
    return unsupported(node, "logits of rank " + Twine(logitsType.getRank()) +
                                 " (flatten them to [N, C])");
  const onnx::AttributeProto *ignore = findAttribute(node, "ignore_index");
  define(node,
         mpc::CrossEntropyOp::create(
             builder, location, RankedTensorType::get({}, builder.getF32Type()),
             logits, targets->second,
             ignore ? builder.getI64IntegerAttr(ignore->i()) : IntegerAttr()));
  return success();
}

} // namespace mlir::mpc::onnx_import
