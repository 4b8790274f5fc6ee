//===- Importer.h - the ONNX importer's shared parts ------------*- C++ -*-===//
//
// What the parts of `mpc import` share (OnnxImport.h is its interface):
// the tensors and attributes read from the protobuf (Reader.cpp) and the
// Importer, whose work is split by stage: the graph and the model it
// becomes (Graph.cpp), constant evaluation (ConstantEvaluation.cpp), the
// exporter's decompositions recognised back (Recognisers.cpp) and the
// translation of single nodes (Nodes.cpp).
//
// Only built with ONNX (MPC_HAVE_ONNX); included by the importer's files
// alone.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_IMPORT_IMPORTER_H
#define MPC_COMPILER_IMPORT_IMPORTER_H

#include "compiler/import/OnnxImport.h"

#include "dialect/MpcDialect.h"
#include "dialect/MpcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mlir::mpc::onnx_import {

/// The opsets whose operator semantics the translation follows: 13 made
/// Split, Squeeze and Unsqueeze take tensors; 18 moves ReduceMean's axes to
/// an input and is newer than Debian's libonnx (1.12).
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;

using onnx::NodeProto;
using onnx::TensorProto;

inline int64_t product(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

std::string typeName(int32_t type);

bool isFloatType(int32_t type);

/// A tensor whose value the importer knows: a Constant node, a buffer, or
/// the result of integer-shape arithmetic. Values are held as doubles, which
/// represent every f32, i32, bool and index exactly.
struct Constant {
  int32_t type = TensorProto::FLOAT;
  SmallVector<int64_t> shape;
  std::vector<double> values;

  int64_t size() const { return product(shape); }
  SmallVector<int64_t> strides() const {
    SmallVector<int64_t> result(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
      result[i] = result[i + 1] * shape[i + 1];
    return result;
  }
};

/// Reads an initializer or a Constant's tensor; the error says why not.
std::optional<std::string> readTensor(const TensorProto &tensor, Constant &out);

const onnx::AttributeProto *findAttribute(const NodeProto &node,
                                          StringRef name);

int64_t intAttribute(const NodeProto &node, StringRef name, int64_t otherwise);

/// An integer constant, held as a double, back as an int64_t, saturated:
/// the exporter's open-ended slice bounds are INT64_MAX and INT64_MIN, which
/// a double rounds to +-2^63, past the range of int64_t.
inline int64_t saturatingInt64(double value) {
  constexpr double limit = 9223372036854775808.0; // 2^63
  if (value >= limit)
    return std::numeric_limits<int64_t>::max();
  if (value <= -limit)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

/// The shortest decimal that reads back as the same f32, as a double: an
/// eps the user wrote as 1e-5 and ONNX stored as an f32 reads 1e-5 again.
double asWritten(double value);

double floatAttribute(const NodeProto &node, StringRef name, double otherwise);

std::optional<SmallVector<int64_t>> intsAttribute(const NodeProto &node,
                                                  StringRef name);

std::string stringAttribute(const NodeProto &node, StringRef name,
                            StringRef otherwise);

bool near(std::optional<double> value, double expected);

/// A model name from a file name: its stem, with what is not an identifier
/// character made '_'.
std::string identifierFrom(StringRef path);

bool isIdentifier(StringRef name);

/// A node's name for a location, which generated code quotes and
/// comments carry: control characters become spaces.
std::string printableName(const NodeProto &node);

class Importer {
public:
  Importer(onnx::ModelProto &model, const mpc::ImportOptions &options,
           int64_t opset, MLIRContext &context)
      : model(model), graph(*model.mutable_graph()), options(options),
        opset(opset), context(context), builder(&context) {}

  /// Builds the model; null after an error, which has been printed.
  mpc::ModelOp translate();

  /// The parameter and state values, for --weights.
  LogicalResult writeWeights(StringRef path);

private:
  //===--- Errors --------------------------------------------------------===//
  LogicalResult fail(const Twine &message) {
    llvm::errs() << "mpc import: error: " << options.inputFile << ": "
                 << message << "\n";
    return failure();
  }
  LogicalResult fail(const NodeProto &node, const Twine &message) {
    return fail("node '" + node.name() + "' (" + node.op_type() + ", opset " +
                Twine(opset) + "): " + message);
  }
  LogicalResult unsupported(const NodeProto &node, const Twine &what) {
    return fail(node, what + " is not supported");
  }

  //===--- The graph -----------------------------------------------------===//
  void indexGraph();
  /// Reads the value types ONNX shape inference left in the graph.
  void indexTypes();
  /// Evaluates every node that can be, again after shapes are inferred
  /// again from what was evaluated, until nothing new is.
  LogicalResult foldConstants();
  /// Writes the nodes evaluated so far back as Constant nodes (same index,
  /// same output) and runs ONNX shape inference again.
  LogicalResult inferShapesFromConstants();
  LogicalResult classifyInitializers();
  LogicalResult buildModel();
  LogicalResult translateNode(int index);
  std::optional<LogicalResult> recognise(int index);
  std::optional<LogicalResult> foldConstant(const NodeProto &node);

  /// The single node reading `name`, when `name` is no graph output.
  const NodeProto *soleConsumer(const std::string &name) const;
  /// Of a two-input node that reads `name`, the other input; empty if it
  /// does not read it.
  static std::string otherInput(const NodeProto &node, const std::string &name);
  static bool isOp(const NodeProto *node, StringRef type) {
    return node && node->op_type() == type;
  }
  int indexOf(const NodeProto *node) const { return nodeIndex.at(node); }
  /// Marks the nodes a pattern starting at `first` covered as translated,
  /// and locates `value`'s op at all of them: "<first> .. <last> (<what>:
  /// <op types>)".
  void recognised(Value value, StringRef what, const NodeProto &first,
                  std::initializer_list<const NodeProto *> rest) {
    std::string name = printableName(first) + " .. " +
                       printableName(**std::prev(rest.end())) + " (" +
                       what.str() + ": " + first.op_type();
    for (const NodeProto *node : rest) {
      done[indexOf(node)] = true;
      name += " " + node->op_type();
    }
    name += ")";
    value.getDefiningOp()->setLoc(
        NameLoc::get(StringAttr::get(&context, name),
                     FileLineColLoc::get(&context, options.inputFile,
                                         indexOf(&first) + 1, 1)));
  }

  //===--- Values --------------------------------------------------------===//
  const Constant *constant(const std::string &name) const {
    auto it = constants.find(name);
    return it == constants.end() ? nullptr : &it->second;
  }
  std::optional<double> scalar(const std::string &name) const {
    const Constant *known = constant(name);
    if (!known || known->size() != 1)
      return std::nullopt;
    return known->values.front();
  }
  /// The value of `name`, a constant float tensor made an mpc.constant.
  Value operand(const NodeProto &node, int index);
  /// The mpc type ONNX shape inference gave output `index` of `node`.
  RankedTensorType resultType(const NodeProto &node, int index = 0);
  std::optional<Type> elementType(int32_t onnxType);
  Value floatConstant(ArrayRef<int64_t> shape, ArrayRef<double> values);
  void define(const NodeProto &node, Value value, int index = 0) {
    values[node.output(index)] = value;
  }
  Location locationOf(int index);

  /// An ONNX axis, made non-negative against `rank`.
  static int64_t axis(int64_t value, int64_t rank) {
    return value < 0 ? value + rank : value;
  }

  //===--- Translations --------------------------------------------------===//
  LogicalResult translateBinary(const NodeProto &node);
  LogicalResult translateClip(const NodeProto &node);
  LogicalResult translateHardSigmoid(const NodeProto &node);
  LogicalResult translateMatMul(const NodeProto &node);
  LogicalResult translateGemm(const NodeProto &node);
  LogicalResult translateReshapeLike(const NodeProto &node);
  LogicalResult translateSlice(const NodeProto &node);
  LogicalResult translateSplit(const NodeProto &node);
  LogicalResult translateGather(const NodeProto &node);
  LogicalResult translateWhere(const NodeProto &node);
  LogicalResult translateConv(const NodeProto &node);
  /// A pooling node; with `pad`, the Pad of zeros before an AveragePool,
  /// which becomes the pool's padding.
  LogicalResult translatePool(const NodeProto &node,
                              const NodeProto *pad = nullptr);
  LogicalResult translateBatchNorm(const NodeProto &node);
  LogicalResult translateLayerNorm(const NodeProto &node);
  LogicalResult translateReduce(const NodeProto &node);
  LogicalResult translateCrossEntropy(const NodeProto &node);

  onnx::ModelProto &model;
  onnx::GraphProto &graph;
  const mpc::ImportOptions &options;
  int64_t opset;
  MLIRContext &context;
  OpBuilder builder;
  mpc::ModelOp modelOp;

  std::map<std::string, const TensorProto *> initializers;
  std::map<std::string, const onnx::TypeProto *> types;
  std::map<std::string, std::vector<int>> consumers;
  std::set<std::string> graphOutputs;
  std::vector<bool> done;
  std::map<const NodeProto *, int> nodeIndex;

  std::vector<std::string> inputNames, paramNames, stateNames;
  std::map<std::string, Value> values;
  std::map<std::string, Constant> constants;
  std::map<std::string, Value> materialized;
  Location location = UnknownLoc::get(&context);
};

} // namespace mlir::mpc::onnx_import

#endif // MPC_COMPILER_IMPORT_IMPORTER_H
