//===- ConstantEvaluation.cpp - ONNX nodes evaluated at import ------------===//
//
// Nodes whose inputs are all known (Constant nodes, buffers, shapes) are
// evaluated here, so that only tensors of static shape reach the model:
// Shape, Gather, Concat and the integer arithmetic of reshapes.
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
// Constant evaluation
//===----------------------------------------------------------------------===//

/// Evaluates `node` when all it reads is known: a Constant, a buffer, or
/// integer-shape arithmetic (Shape of a computed value is known too, as
/// shapes are static). Returns nullopt when the node computes at run time.
std::optional<LogicalResult> Importer::foldConstant(const NodeProto &node) {
  const std::string &type = node.op_type();
  if (type == "Constant") {
    const onnx::AttributeProto *value = findAttribute(node, "value");
    Constant known;
    if (value && value->has_t()) {
      if (std::optional<std::string> error = readTensor(value->t(), known))
        return fail(node, "its value: " + *error);
    } else if (const auto *single = findAttribute(node, "value_float")) {
      known.values = {single->f()};
    } else if (const auto *integer = findAttribute(node, "value_int")) {
      known.type = TensorProto::INT64;
      known.values = {static_cast<double>(integer->i())};
    } else if (const auto *ints = findAttribute(node, "value_ints")) {
      known.type = TensorProto::INT64;
      known.shape = {ints->ints_size()};
      for (int64_t v : ints->ints())
        known.values.push_back(static_cast<double>(v));
    } else {
      return unsupported(node, "a Constant without a tensor value");
    }
    constants[node.output(0)] = std::move(known);
    return success();
  }
  if (type == "Shape") {
    // Shapes are static: ONNX inferred every value's.
    const Constant *known = constant(node.input(0));
    SmallVector<int64_t> shape;
    if (known) {
      shape = known->shape;
    } else {
      auto it = types.find(node.input(0));
      if (it == types.end() || !it->second->has_tensor_type() ||
          !it->second->tensor_type().has_shape())
        return std::nullopt;
      // An extent ONNX could not infer yet may follow from what is
      // evaluated now (Swin pads to a multiple of its window by amounts
      // computed from shapes): inferred again after this round, or an
      // error when the node is translated.
      for (const auto &dim : it->second->tensor_type().shape().dim()) {
        if (!dim.has_dim_value())
          return std::nullopt;
        shape.push_back(dim.dim_value());
      }
    }
    int64_t rank = shape.size();
    int64_t start = axis(intAttribute(node, "start", 0), rank);
    int64_t end = axis(intAttribute(node, "end", rank), rank);
    Constant result;
    result.type = TensorProto::INT64;
    for (int64_t i = std::clamp<int64_t>(start, 0, rank);
         i < std::clamp<int64_t>(end, 0, rank); ++i)
      result.values.push_back(static_cast<double>(shape[i]));
    result.shape = {static_cast<int64_t>(result.values.size())};
    constants[node.output(0)] = std::move(result);
    return success();
  }

  SmallVector<const Constant *> inputs;
  for (const std::string &input : node.input()) {
    if (input.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    const Constant *known = constant(input);
    if (!known)
      return std::nullopt;
    inputs.push_back(known);
  }
  if (inputs.empty() || !inputs[0])
    return std::nullopt;
  const Constant &a = *inputs[0];
  Constant result;
  result.type = a.type;

  auto ints = [](const Constant *known) {
    SmallVector<int64_t> out;
    if (known)
      for (double v : known->values)
        out.push_back(saturatingInt64(v));
    return out;
  };
  // Elementwise with NumPy broadcasting.
  auto broadcast = [&](ArrayRef<const Constant *> operands, auto function,
                       int32_t resultType) -> LogicalResult {
    size_t rank = 0;
    for (const Constant *c : operands)
      rank = std::max(rank, c->shape.size());
    SmallVector<int64_t> shape(rank, 1);
    for (const Constant *c : operands)
      for (size_t i = 0; i < c->shape.size(); ++i) {
        int64_t &extent = shape[rank - c->shape.size() + i];
        int64_t other = c->shape[i];
        if (extent != 1 && other != 1 && extent != other)
          return fail(node, "the constant operands do not broadcast");
        extent = extent == 1 ? other : extent;
      }
    result.type = resultType;
    result.shape = shape;
    result.values.assign(product(shape), 0.0);
    SmallVector<double> args(operands.size());
    SmallVector<int64_t> index(rank, 0);
    for (int64_t flat = 0; flat < result.size(); ++flat) {
      for (size_t k = 0; k < operands.size(); ++k) {
        const Constant *c = operands[k];
        size_t offset = rank - c->shape.size();
        int64_t position = 0;
        for (size_t i = 0; i < c->shape.size(); ++i)
          position = position * c->shape[i] +
                     (c->shape[i] == 1 ? 0 : index[offset + i]);
        args[k] = c->values[position];
      }
      result.values[flat] = function(ArrayRef<double>(args));
      for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
        if (++index[i] < shape[i])
          break;
        index[i] = 0;
      }
    }
    return success();
  };
  bool integer = !isFloatType(a.type);
  auto finish = [&](LogicalResult status) -> std::optional<LogicalResult> {
    if (succeeded(status))
      constants[node.output(0)] = std::move(result);
    return status;
  };

  if (type == "Identity")
    return finish((result = a, success()));
  if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div" ||
      type == "Pow") {
    if (inputs.size() != 2 || !inputs[1])
      return std::nullopt;
    // Pow: Swin's head_dim ** -0.5 of a traced shape.
    char op = type == "Add"   ? '+'
              : type == "Sub" ? '-'
              : type == "Mul" ? '*'
              : type == "Div" ? '/'
                              : '^';
    return finish(broadcast(
        {&a, inputs[1]},
        [&](ArrayRef<double> x) {
          double value = op == '+'   ? x[0] + x[1]
                         : op == '-' ? x[0] - x[1]
                         : op == '*' ? x[0] * x[1]
                         : op == '/' ? x[0] / x[1]
                                     : std::pow(x[0], x[1]);
          // ONNX's integer Div truncates, as C's does.
          if (integer && op == '/')
            value = std::trunc(value);
          return integer || a.type == TensorProto::DOUBLE
                     ? value
                     : static_cast<double>(static_cast<float>(value));
        },
        a.type));
  }
  if (type == "ScatterND") {
    // Swin's shifted-window mask, written region by region into zeros.
    if (inputs.size() != 3 || !inputs[1] || !inputs[2])
      return std::nullopt;
    if (stringAttribute(node, "reduction", "none") != "none")
      return unsupported(node, "a constant ScatterND with a reduction");
    const Constant &indices = *inputs[1], &updates = *inputs[2];
    int64_t depth = indices.shape.empty() ? 0 : indices.shape.back();
    int64_t rank = a.shape.size();
    if (indices.shape.empty() || depth < 1 || depth > rank)
      return fail(node, "ScatterND indices must end in a dimension of 1 to " +
                            Twine(rank) + " entries");
    // Each index tuple names a slice of data of this many elements.
    int64_t slice = product(ArrayRef<int64_t>(a.shape).drop_front(depth));
    int64_t tuples = indices.size() / depth;
    if (updates.size() != tuples * slice)
      return fail(node, "ScatterND updates hold " + Twine(updates.size()) +
                            " elements, not " + Twine(tuples * slice));
    SmallVector<int64_t> strides = a.strides();
    result = a;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t d = 0; d < depth; ++d) {
        int64_t i = saturatingInt64(indices.values[t * depth + d]);
        if (i < -a.shape[d] || i >= a.shape[d])
          return fail(node, "ScatterND index " + Twine(i) +
                                " is outside axis " + Twine(d));
        offset += (i < 0 ? i + a.shape[d] : i) * strides[d];
      }
      std::copy_n(updates.values.begin() + t * slice, slice,
                  result.values.begin() + offset);
    }
    return finish(success());
  }
  if (type == "Mod") {
    // Swin's padding to a multiple of its window: (w - W % w) % w.
    if (inputs.size() != 2 || !inputs[1])
      return std::nullopt;
    bool cStyle = intAttribute(node, "fmod", 0);
    if (llvm::is_contained(inputs[1]->values, 0.0))
      return fail(node, "a Mod by zero");
    return finish(broadcast(
        {&a, inputs[1]},
        [&](ArrayRef<double> x) {
          // fmod=1: C's fmod, the dividend's sign; else Python's %, the
          // divisor's.
          double value = std::fmod(x[0], x[1]);
          if (!cStyle && value != 0 && (value < 0) != (x[1] < 0))
            value += x[1];
          return value;
        },
        a.type));
  }
  if (type == "Equal" || type == "Less" || type == "Greater") {
    if (inputs.size() != 2 || !inputs[1])
      return std::nullopt;
    return finish(broadcast(
        {&a, inputs[1]},
        [&](ArrayRef<double> x) {
          return double(type == "Equal"  ? x[0] == x[1]
                        : type == "Less" ? x[0] < x[1]
                                         : x[0] > x[1]);
        },
        TensorProto::BOOL));
  }
  if (type == "Not")
    return finish(broadcast(
        {&a}, [](ArrayRef<double> x) { return double(x[0] == 0); },
        TensorProto::BOOL));
  if (type == "Where") {
    if (inputs.size() != 3)
      return std::nullopt;
    return finish(broadcast(
        {&a, inputs[1], inputs[2]},
        [](ArrayRef<double> x) { return x[0] != 0 ? x[1] : x[2]; },
        inputs[1]->type));
  }
  if (type == "Cast") {
    int32_t to = intAttribute(node, "to", TensorProto::FLOAT);
    return finish(broadcast(
        {&a},
        [&](ArrayRef<double> x) {
          if (to == TensorProto::BOOL)
            return double(x[0] != 0);
          if (to == TensorProto::FLOAT)
            return static_cast<double>(static_cast<float>(x[0]));
          if (!isFloatType(to))
            return std::trunc(x[0]);
          return x[0];
        },
        to));
  }
  if (type == "Unsqueeze" || type == "Squeeze" || type == "Reshape" ||
      type == "Flatten") {
    result = a;
    SmallVector<int64_t> shape(a.shape);
    if (type == "Unsqueeze") {
      SmallVector<int64_t> axes = ints(inputs.size() > 1 ? inputs[1] : nullptr);
      int64_t rank = shape.size() + axes.size();
      for (int64_t &a : axes)
        a = axis(a, rank);
      llvm::sort(axes);
      for (int64_t a : axes)
        shape.insert(shape.begin() + a, 1);
    } else if (type == "Squeeze") {
      SmallVector<int64_t> axes = ints(inputs.size() > 1 ? inputs[1] : nullptr);
      SmallVector<int64_t> kept;
      for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
        if (axes.empty()
                ? shape[i] != 1
                : !llvm::is_contained(axes, i) &&
                      !llvm::is_contained(axes, i - int64_t(shape.size())))
          kept.push_back(shape[i]);
      shape = kept;
    } else if (type == "Flatten") {
      int64_t at = axis(intAttribute(node, "axis", 1), shape.size());
      shape = {product(ArrayRef<int64_t>(shape).take_front(at)),
               product(ArrayRef<int64_t>(shape).drop_front(at))};
    } else {
      if (inputs.size() < 2 || !inputs[1])
        return std::nullopt;
      shape = ints(inputs[1]);
      int64_t known = 1, inferred = -1;
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0)
          shape[i] = a.shape[i];
        if (shape[i] == -1)
          inferred = i;
        else
          known *= shape[i];
      }
      if (inferred >= 0)
        shape[inferred] = known ? a.size() / known : 0;
    }
    if (product(shape) != a.size())
      return fail(node, "the constant cannot take the new shape");
    result.shape = shape;
    return finish(success());
  }
  if (type == "Concat") {
    int64_t rank = a.shape.size();
    int64_t at = axis(intAttribute(node, "axis", 0), rank);
    result.shape = a.shape;
    result.shape[at] = 0;
    for (const Constant *c : inputs)
      result.shape[at] += c->shape[at];
    int64_t outer = product(ArrayRef<int64_t>(a.shape).take_front(at));
    for (int64_t o = 0; o < outer; ++o)
      for (const Constant *c : inputs) {
        int64_t chunk = product(ArrayRef<int64_t>(c->shape).drop_front(at));
        result.values.insert(result.values.end(), c->values.begin() + o * chunk,
                             c->values.begin() + (o + 1) * chunk);
      }
    return finish(success());
  }
  if (type == "Gather") {
    if (inputs.size() != 2)
      return std::nullopt;
    int64_t rank = a.shape.size();
    int64_t at = axis(intAttribute(node, "axis", 0), rank);
    const Constant &indices = *inputs[1];
    result.shape.assign(a.shape.begin(), a.shape.begin() + at);
    result.shape.append(indices.shape.begin(), indices.shape.end());
    result.shape.append(a.shape.begin() + at + 1, a.shape.end());
    int64_t outer = product(ArrayRef<int64_t>(a.shape).take_front(at));
    int64_t inner = product(ArrayRef<int64_t>(a.shape).drop_front(at + 1));
    for (int64_t o = 0; o < outer; ++o)
      for (double raw : indices.values) {
        int64_t i = static_cast<int64_t>(raw);
        i = i < 0 ? i + a.shape[at] : i;
        if (i < 0 || i >= a.shape[at])
          return fail(node, "a constant index is out of range");
        auto begin = a.values.begin() + (o * a.shape[at] + i) * inner;
        result.values.insert(result.values.end(), begin, begin + inner);
      }
    return finish(success());
  }
  if (type == "Slice") {
    if (inputs.size() < 3)
      return std::nullopt;
    SmallVector<int64_t> starts = ints(inputs[1]), ends = ints(inputs[2]);
    int64_t rank = a.shape.size();
    SmallVector<int64_t> axes =
        inputs.size() > 3 && inputs[3]
            ? ints(inputs[3])
            : llvm::to_vector(llvm::seq<int64_t>(0, rank));
    SmallVector<int64_t> steps = inputs.size() > 4 && inputs[4]
                                     ? ints(inputs[4])
                                     : SmallVector<int64_t>(axes.size(), 1);
    SmallVector<int64_t> begin(rank, 0), step(rank, 1);
    result.shape = a.shape;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t d = axis(axes[k], rank), extent = a.shape[d];
      if (steps[k] == 0)
        return fail(node, "a slice with a step of 0");
      // ONNX's clamping: to [0, extent] going forward; going backward
      // (x[::-1]: start extent-1, end below 0) to [-1, extent-1].
      int64_t s = starts[k] < 0 ? starts[k] + extent : starts[k];
      int64_t e = ends[k] < 0 ? ends[k] + extent : ends[k];
      bool forward = steps[k] > 0;
      s = std::clamp<int64_t>(s, 0, forward ? extent : extent - 1);
      e = std::clamp<int64_t>(e, forward ? 0 : -1,
                              forward ? extent : extent - 1);
      begin[d] = s;
      step[d] = steps[k];
      int64_t span = forward ? e - s : s - e, stride = std::abs(steps[k]);
      result.shape[d] = span > 0 ? (span + stride - 1) / stride : 0;
    }
    SmallVector<int64_t> strides = a.strides(), index(rank, 0);
    for (int64_t flat = 0; flat < result.size(); ++flat) {
      int64_t position = 0;
      for (int64_t d = 0; d < rank; ++d)
        position += (begin[d] + index[d] * step[d]) * strides[d];
      result.values.push_back(a.values[position]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++index[d] < result.shape[d])
          break;
        index[d] = 0;
      }
    }
    return finish(success());
  }
  if (type == "Transpose") {
    int64_t rank = a.shape.size();
    SmallVector<int64_t> perm =
        intsAttribute(node, "perm")
            .value_or(
                llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank))));
    SmallVector<int64_t> strides = a.strides(), index(rank, 0);
    for (int64_t d = 0; d < rank; ++d)
      result.shape.push_back(a.shape[perm[d]]);
    for (int64_t flat = 0; flat < a.size(); ++flat) {
      int64_t position = 0;
      for (int64_t d = 0; d < rank; ++d)
        position += index[d] * strides[perm[d]];
      result.values.push_back(a.values[position]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++index[d] < result.shape[d])
          break;
        index[d] = 0;
      }
    }
    return finish(success());
  }
  if (type == "ConstantOfShape") {
    result.shape = ints(&a);
    Constant fill;
    fill.values = {0.0};
    if (const onnx::AttributeProto *value = findAttribute(node, "value"))
      if (std::optional<std::string> error = readTensor(value->t(), fill))
        return fail(node, "its value: " + *error);
    result.type = fill.type;
    result.values.assign(product(result.shape), fill.values.front());
    return finish(success());
  }
  if (type == "Range") {
    if (inputs.size() != 3)
      return std::nullopt;
    double start = a.values.front(), limit = inputs[1]->values.front(),
           delta = inputs[2]->values.front();
    if (delta == 0)
      return fail(node, "Range with delta 0");
    for (double v = start; delta > 0 ? v < limit : v > limit; v += delta)
      result.values.push_back(v);
    result.shape = {static_cast<int64_t>(result.values.size())};
    return finish(success());
  }
  if (type == "Trilu") {
    int64_t rank = a.shape.size();
    int64_t k = inputs.size() > 1 && inputs[1] ? ints(inputs[1]).front() : 0;
    bool upper = intAttribute(node, "upper", 1);
    result = a;
    int64_t rows = a.shape[rank - 2], columns = a.shape[rank - 1];
    for (int64_t flat = 0; flat < a.size(); ++flat) {
      int64_t j = flat % columns, i = (flat / columns) % rows;
      bool keep = upper ? j - i >= k : j - i <= k;
      if (!keep)
        result.values[flat] = 0;
    }
    return finish(success());
  }
  if (type == "Expand") {
    if (inputs.size() != 2)
      return std::nullopt;
    Constant shape;
    shape.shape = ints(inputs[1]);
    shape.values.assign(product(shape.shape), 0.0);
    return finish(broadcast(
        {&a, &shape}, [](ArrayRef<double> x) { return x[0]; }, a.type));
  }
  return std::nullopt;
}

} // namespace mlir::mpc::onnx_import
