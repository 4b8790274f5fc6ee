//===- OnnxImport.cpp - `mpc import`: ONNX training graphs to mpc ---------===//
//
// Translates an ONNX model that torch.onnx.export wrote with
// `training=TrainingMode.TRAINING, do_constant_folding=False` from a module
// whose forward returns the loss:
//
//   - graph inputs become model inputs; initializers that reach the loss
//     through a differentiable path become parameters, under their
//     state_dict names; batch-norm running statistics become state; every
//     other initializer (a registered buffer such as a causal mask) and
//     every integer-shape computation (Shape, Gather, Concat, ...) is
//     evaluated here, so that only tensors of static shape remain;
//   - the exporter's decompositions are recognised back into mpc ops: GELU
//     from its Erf or Tanh chain, SiLU from x * sigmoid(x), RMSNorm, layer
//     norm (opsets before 17) and the mean squared error from their
//     written-out forms, cross-entropy from SoftmaxCrossEntropyLoss or
//     LogSoftmax + NegativeLogLikelihoodLoss, linear from Gemm or
//     Transpose + MatMul (+ Add);
//   - each op is located at its node: NameLoc("<node> (<OpType>)") around
//     `<file>.onnx:<node number>:1`, so --report, the numerics lint and
//     the first-NaN locator name the node.
//
// Anything else is an error naming the node, its op type and the opset,
// never a guess: the model is checked (onnx::checker), its shapes inferred
// strictly (onnx::shape_inference), and the result verified.
//
// The file is compiled with exceptions: libonnx reports through them.
//
//===----------------------------------------------------------------------===//

#include "compiler/OnnxImport.h"

#include "dialect/MpcDialect.h"
#include "dialect/MpcOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#ifdef MPC_HAVE_ONNX
#include "runtime/safetensors.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#endif

using namespace mlir;

#ifndef MPC_HAVE_ONNX

bool mlir::mpc::haveOnnx() { return false; }

int mlir::mpc::runImport(const ImportOptions &) {
  llvm::errs() << "mpc import: error: this mpc was built without ONNX; "
                  "install libonnx-dev (tools/setup.sh does) and rebuild\n";
  return 1;
}

#else

bool mlir::mpc::haveOnnx() { return true; }

namespace {

/// The opsets whose operator semantics the translation follows: 13 made
/// Split, Squeeze and Unsqueeze take tensors; 18 moves ReduceMean's axes to
/// an input and is newer than Debian's libonnx (1.12).
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;

using onnx::NodeProto;
using onnx::TensorProto;

int64_t product(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

std::string typeName(int32_t type) {
  return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
}

bool isFloatType(int32_t type) {
  return type == TensorProto::FLOAT || type == TensorProto::FLOAT16 ||
         type == TensorProto::BFLOAT16 || type == TensorProto::DOUBLE;
}

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
std::optional<std::string> readTensor(const TensorProto &tensor,
                                      Constant &out) {
  if (tensor.data_location() == TensorProto::EXTERNAL)
    return std::string("its data is in an external file, which mpc import "
                       "does not read");
  out.type = tensor.data_type();
  out.shape.assign(tensor.dims().begin(), tensor.dims().end());
  if (llvm::any_of(out.shape, [](int64_t extent) { return extent < 0; }))
    return std::string("it has a negative extent");
  int64_t count = out.size();
  out.values.assign(count, 0.0);
  const std::string &raw = tensor.raw_data();
  auto fromRaw = [&](auto sample, auto convert) -> std::optional<std::string> {
    using T = decltype(sample);
    if (raw.size() != static_cast<size_t>(count) * sizeof(T))
      return "it holds " + std::to_string(raw.size()) + " bytes for " +
             std::to_string(count) + " elements";
    for (int64_t i = 0; i < count; ++i) {
      T element;
      std::memcpy(&element, raw.data() + i * sizeof(T), sizeof(T));
      out.values[i] = convert(element);
    }
    return std::nullopt;
  };
  auto fromField = [&](const auto &field,
                       auto convert) -> std::optional<std::string> {
    if (field.size() != count)
      return "it holds " + std::to_string(field.size()) + " values for " +
             std::to_string(count) + " elements";
    for (int64_t i = 0; i < count; ++i)
      out.values[i] = convert(field.Get(i));
    return std::nullopt;
  };
  auto same = [](auto value) { return static_cast<double>(value); };
  auto half = [](const llvm::fltSemantics &semantics) {
    return [&semantics](auto bits) {
      APFloat value(semantics, APInt(16, static_cast<uint16_t>(bits)));
      bool lost;
      value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      return value.convertToDouble();
    };
  };
  bool hasRaw = tensor.has_raw_data();
  switch (tensor.data_type()) {
  case TensorProto::FLOAT:
    return hasRaw ? fromRaw(float(), same)
                  : fromField(tensor.float_data(), same);
  case TensorProto::DOUBLE:
    return hasRaw ? fromRaw(double(), same)
                  : fromField(tensor.double_data(), same);
  case TensorProto::INT64:
    return hasRaw ? fromRaw(int64_t(), same)
                  : fromField(tensor.int64_data(), same);
  case TensorProto::INT32:
    return hasRaw ? fromRaw(int32_t(), same)
                  : fromField(tensor.int32_data(), same);
  case TensorProto::BOOL:
  case TensorProto::UINT8:
    return hasRaw ? fromRaw(uint8_t(), same)
                  : fromField(tensor.int32_data(), same);
  case TensorProto::INT8:
    return hasRaw ? fromRaw(int8_t(), same)
                  : fromField(tensor.int32_data(), same);
  case TensorProto::FLOAT16:
    return hasRaw ? fromRaw(uint16_t(), half(APFloat::IEEEhalf()))
                  : fromField(tensor.int32_data(), half(APFloat::IEEEhalf()));
  case TensorProto::BFLOAT16:
    return hasRaw ? fromRaw(uint16_t(), half(APFloat::BFloat()))
                  : fromField(tensor.int32_data(), half(APFloat::BFloat()));
  default:
    return "its element type " + typeName(tensor.data_type()) +
           " is not supported";
  }
}

const onnx::AttributeProto *findAttribute(const NodeProto &node,
                                          StringRef name) {
  for (const onnx::AttributeProto &attribute : node.attribute())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

int64_t intAttribute(const NodeProto &node, StringRef name, int64_t otherwise) {
  const onnx::AttributeProto *attribute = findAttribute(node, name);
  return attribute ? attribute->i() : otherwise;
}

/// The shortest decimal that reads back as the same f32, as a double: an
/// eps the user wrote as 1e-5 and ONNX stored as an f32 reads 1e-5 again.
double asWritten(double value) {
  char text[32];
  std::to_chars_result end =
      std::to_chars(text, text + sizeof(text), static_cast<float>(value));
  return std::strtod(std::string(text, end.ptr).c_str(), nullptr);
}

double floatAttribute(const NodeProto &node, StringRef name, double otherwise) {
  const onnx::AttributeProto *attribute = findAttribute(node, name);
  return attribute ? asWritten(attribute->f()) : otherwise;
}

std::optional<SmallVector<int64_t>> intsAttribute(const NodeProto &node,
                                                  StringRef name) {
  const onnx::AttributeProto *attribute = findAttribute(node, name);
  if (!attribute)
    return std::nullopt;
  return SmallVector<int64_t>(attribute->ints().begin(),
                              attribute->ints().end());
}

std::string stringAttribute(const NodeProto &node, StringRef name,
                            StringRef otherwise) {
  const onnx::AttributeProto *attribute = findAttribute(node, name);
  return attribute ? attribute->s() : otherwise.str();
}

bool near(std::optional<double> value, double expected) {
  return value && std::abs(*value - expected) <= 1e-4 * std::abs(expected);
}

/// A model name from a file name: its stem, with what is not an identifier
/// character made '_'.
std::string identifierFrom(StringRef path) {
  std::string name = llvm::sys::path::stem(path).str();
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_')
      c = '_';
  if (name.empty() || llvm::isDigit(name.front()))
    name = "model_" + name;
  return name;
}

bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name.front()) || name.front() == '_'))
    return false;
  return llvm::all_of(
      name, [](char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; });
}

/// A node's name for a location, which generated code quotes and
/// comments carry: control characters become spaces.
std::string printableName(const NodeProto &node) {
  std::string name = node.name().empty() ? node.output(0) : node.name();
  for (char &c : name)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  return name;
}

class Importer {
public:
  Importer(onnx::ModelProto &model, const mpc::ImportOptions &options,
           int64_t opset, MLIRContext &context)
      : graph(*model.mutable_graph()), options(options), opset(opset),
        context(context), builder(&context) {}

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
  LogicalResult translateMatMul(const NodeProto &node);
  LogicalResult translateGemm(const NodeProto &node);
  LogicalResult translateReshapeLike(const NodeProto &node);
  LogicalResult translateSlice(const NodeProto &node);
  LogicalResult translateSplit(const NodeProto &node);
  LogicalResult translateGather(const NodeProto &node);
  LogicalResult translateWhere(const NodeProto &node);
  LogicalResult translateConv(const NodeProto &node);
  LogicalResult translatePool(const NodeProto &node);
  LogicalResult translateBatchNorm(const NodeProto &node);
  LogicalResult translateLayerNorm(const NodeProto &node);
  LogicalResult translateReduce(const NodeProto &node);
  LogicalResult translateCrossEntropy(const NodeProto &node);

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

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

void Importer::indexGraph() {
  for (const TensorProto &initializer : graph.initializer())
    initializers[initializer.name()] = &initializer;
  for (const onnx::ValueInfoProto &info : graph.input())
    types[info.name()] = &info.type();
  for (const onnx::ValueInfoProto &info : graph.value_info())
    types[info.name()] = &info.type();
  for (const onnx::ValueInfoProto &info : graph.output()) {
    types[info.name()] = &info.type();
    graphOutputs.insert(info.name());
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto &node = graph.node(i);
    nodeIndex[&node] = i;
    for (const std::string &input : node.input())
      if (!input.empty())
        consumers[input].push_back(i);
  }
  done.assign(graph.node_size(), false);
}

/// Parameters are the initializers the loss depends on through float values
/// (a gradient can reach them); batch-norm running statistics are state;
/// the rest (buffers read only through comparisons, shapes or indices) are
/// constants, evaluated at import.
LogicalResult Importer::classifyInitializers() {
  auto isFloat = [&](const std::string &name) {
    if (auto it = initializers.find(name); it != initializers.end())
      return isFloatType(it->second->data_type());
    auto it = types.find(name);
    return it == types.end() || !it->second->has_tensor_type() ||
           isFloatType(it->second->tensor_type().elem_type());
  };
  std::set<std::string> differentiable = {graph.output(0).name()};
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const NodeProto &node = graph.node(i);
    bool reaches = llvm::any_of(node.output(), [&](const std::string &output) {
      return differentiable.count(output) && isFloat(output);
    });
    if (!reaches || node.op_type() == "Shape" || node.op_type() == "Size")
      continue;
    for (const std::string &input : node.input())
      if (!input.empty() && isFloat(input))
        differentiable.insert(input);
  }

  std::set<std::string> state;
  for (const NodeProto &node : graph.node())
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        state.insert(node.input(i));

  for (const TensorProto &initializer : graph.initializer()) {
    const std::string &name = initializer.name();
    bool isState = state.count(name);
    if (!isState && !differentiable.count(name)) {
      Constant known;
      if (std::optional<std::string> error = readTensor(initializer, known))
        return fail("initializer '" + name + "': " + *error);
      constants[name] = std::move(known);
      continue;
    }
    if (initializer.data_type() != TensorProto::FLOAT)
      return fail("initializer '" + name + "' is " +
                  typeName(initializer.data_type()) +
                  "; parameters and state must be FLOAT (export the module "
                  "in float32: mpc keeps f32 master weights)");
    if (!isIdentifier(name))
      return fail("initializer '" + name +
                  "' cannot name a parameter: names are identifiers "
                  "([A-Za-z_][A-Za-z0-9_.]*); give the module a named "
                  "attribute instead of a bare nn.Sequential index");
    (isState ? stateNames : paramNames).push_back(name);
  }
  return success();
}

const NodeProto *Importer::soleConsumer(const std::string &name) const {
  auto it = consumers.find(name);
  if (it == consumers.end() || it->second.size() != 1 ||
      graphOutputs.count(name))
    return nullptr;
  return &graph.node(it->second.front());
}

std::string Importer::otherInput(const NodeProto &node,
                                 const std::string &name) {
  if (node.input_size() != 2)
    return "";
  if (node.input(0) == name)
    return node.input(1);
  if (node.input(1) == name)
    return node.input(0);
  return "";
}

Location Importer::locationOf(int index) {
  const NodeProto &node = graph.node(index);
  return NameLoc::get(
      StringAttr::get(&context,
                      printableName(node) + " (" + node.op_type() + ")"),
      FileLineColLoc::get(&context, options.inputFile, index + 1, 1));
}

std::optional<Type> Importer::elementType(int32_t onnxType) {
  switch (onnxType) {
  case TensorProto::FLOAT:
    return builder.getF32Type();
  case TensorProto::FLOAT16:
    return builder.getF16Type();
  case TensorProto::BFLOAT16:
    return builder.getBF16Type();
  case TensorProto::INT64:
    return builder.getI64Type();
  case TensorProto::INT32:
    return builder.getI32Type();
  default:
    return std::nullopt;
  }
}

RankedTensorType Importer::resultType(const NodeProto &node, int index) {
  const std::string &name = node.output(index);
  auto it = types.find(name);
  if (it == types.end() || !it->second->has_tensor_type() ||
      !it->second->tensor_type().has_shape()) {
    (void)fail(node, "ONNX shape inference gave output '" + name +
                         "' no shape; export with static input shapes");
    return nullptr;
  }
  const onnx::TypeProto_Tensor &tensor = it->second->tensor_type();
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto_Dimension &dim : tensor.shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() <= 0) {
      (void)fail(node, "output '" + name +
                           "' has a dynamic or empty extent; export with "
                           "static input shapes (no dynamic_axes)");
      return nullptr;
    }
    shape.push_back(dim.dim_value());
  }
  std::optional<Type> element = elementType(tensor.elem_type());
  if (!element) {
    (void)fail(node, "output '" + name + "' is " +
                         typeName(tensor.elem_type()) + ", which mpc has not");
    return nullptr;
  }
  return RankedTensorType::get(shape, *element);
}

Value Importer::floatConstant(ArrayRef<int64_t> shape,
                              ArrayRef<double> numbers) {
  auto type = RankedTensorType::get(shape, builder.getF32Type());
  SmallVector<float> singles(numbers.begin(), numbers.end());
  return mpc::ConstantOp::create(
      builder, location, type,
      DenseElementsAttr::get(type, ArrayRef<float>(singles)));
}

Value Importer::operand(const NodeProto &node, int index) {
  if (index >= node.input_size() || node.input(index).empty()) {
    (void)fail(node, "input " + Twine(index) + " is missing");
    return nullptr;
  }
  const std::string &name = node.input(index);
  if (auto it = values.find(name); it != values.end())
    return it->second;
  if (const Constant *known = constant(name)) {
    if (!isFloatType(known->type)) {
      (void)fail(node, "input '" + name + "' is a constant " +
                           typeName(known->type) +
                           " tensor where mpc needs a computed value");
      return nullptr;
    }
    // Once, where it is first read: later readers come after it.
    Value &value = materialized[name];
    if (!value)
      value = floatConstant(known->shape, known->values);
    return value;
  }
  (void)fail(node, "input '" + name + "' is not defined before the node");
  return nullptr;
}

LogicalResult Importer::buildModel() {
  SmallVector<Type> argumentTypes;
  SmallVector<Attribute> paramInits, stateInits;

  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue; // older exporters list initializers as inputs too
    const onnx::TypeProto &type = input.type();
    if (!type.has_tensor_type())
      return fail("graph input '" + input.name() + "' is not a tensor");
    if (!isIdentifier(input.name()))
      return fail("graph input '" + input.name() +
                  "' cannot name a model input: names are identifiers "
                  "([A-Za-z_][A-Za-z0-9_.]*); pass input_names to "
                  "torch.onnx.export");
    SmallVector<int64_t> shape;
    for (const auto &dim : type.tensor_type().shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() <= 0)
        return fail("graph input '" + input.name() + "' has a dynamic extent" +
                    (dim.has_dim_param() ? " '" + dim.dim_param() + "'" : "") +
                    "; mpc compiles static shapes: export without "
                    "dynamic_axes, with the batch you will train on");
      shape.push_back(dim.dim_value());
    }
    std::optional<Type> element = elementType(type.tensor_type().elem_type());
    if (!element)
      return fail("graph input '" + input.name() + "' is " +
                  typeName(type.tensor_type().elem_type()) +
                  "; inputs are FLOAT, FLOAT16, BFLOAT16, INT32 or INT64");
    inputNames.push_back(input.name());
    argumentTypes.push_back(RankedTensorType::get(shape, *element));
  }

  // PyTorch's default initialisation of the layer each tensor belongs to,
  // so that a model trained without --weights starts as PyTorch's would.
  auto initFor = [&](const std::string &name, ArrayRef<int64_t> shape) {
    auto make = [&](mpc::InitKind kind, ArrayRef<double> args = {}) {
      return mpc::InitializerAttr::get(&context, kind,
                                       DenseF64ArrayAttr::get(&context, args));
    };
    StringRef leaf = StringRef(name).rsplit('.').second;
    if (leaf.empty())
      leaf = name;
    if (leaf == "running_var")
      return make(mpc::InitKind::Ones);
    if (leaf == "running_mean")
      return make(mpc::InitKind::Zeros);
    if (shape.size() >= 2)
      return make(mpc::InitKind::KaimingUniform, {std::sqrt(5.0)});
    if (leaf == "weight")
      return make(mpc::InitKind::Ones);
    return make(mpc::InitKind::Zeros);
  };
  auto tensorType = [&](const TensorProto &tensor) {
    return RankedTensorType::get(
        SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()),
        builder.getF32Type());
  };
  for (const std::string &name : paramNames) {
    RankedTensorType type = tensorType(*initializers[name]);
    argumentTypes.push_back(type);
    paramInits.push_back(initFor(name, type.getShape()));
  }
  for (const std::string &name : stateNames) {
    RankedTensorType type = tensorType(*initializers[name]);
    argumentTypes.push_back(type);
    stateInits.push_back(initFor(name, type.getShape()));
  }

  std::string modelName = options.modelName.empty()
                              ? identifierFrom(options.inputFile)
                              : options.modelName;
  auto strings = [&](ArrayRef<std::string> names) {
    return builder.getStrArrayAttr(llvm::map_to_vector(
        names, [](const std::string &s) { return StringRef(s); }));
  };
  OperationState state(FileLineColLoc::get(&context, options.inputFile, 0, 0),
                       mpc::ModelOp::getOperationName());
  state.addAttribute("sym_name", builder.getStringAttr(modelName));
  state.addAttribute("input_names", strings(inputNames));
  state.addAttribute("param_names", strings(paramNames));
  state.addAttribute("param_inits", builder.getArrayAttr(paramInits));
  state.addAttribute("state_names", strings(stateNames));
  state.addAttribute("state_inits", builder.getArrayAttr(stateInits));
  state.addRegion();
  modelOp = cast<mpc::ModelOp>(Operation::create(state));
  Block *body = new Block();
  modelOp.getBody().push_back(body);
  for (Type type : argumentTypes)
    body->addArgument(type, modelOp.getLoc());

  unsigned argument = 0;
  for (const std::string &name : inputNames)
    values[name] = body->getArgument(argument++);
  for (const std::string &name : paramNames)
    values[name] = body->getArgument(argument++);
  for (const std::string &name : stateNames)
    values[name] = body->getArgument(argument++);
  builder.setInsertionPointToStart(body);
  return success();
}

mpc::ModelOp Importer::translate() {
  if (graph.output_size() < 1) {
    (void)fail("the graph has no output; export a module that returns its "
               "loss");
    return nullptr;
  }
  indexGraph();
  if (failed(classifyInitializers()) || failed(buildModel()))
    return nullptr;
  OwningOpRef<mpc::ModelOp> owned(modelOp);

  // Constants first, so that a pattern can read a factor the exporter
  // defined after the pattern's first node.
  for (int i = 0; i < graph.node_size(); ++i) {
    location = locationOf(i);
    if (std::optional<LogicalResult> folded = foldConstant(graph.node(i))) {
      if (failed(*folded))
        return nullptr;
      done[i] = true;
    }
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    if (done[i])
      continue;
    location = locationOf(i);
    if (failed(translateNode(i)))
      return nullptr;
  }

  // The loss is the first output; any other float output is an extra output
  // that evaluation returns.
  const std::string &lossName = graph.output(0).name();
  auto loss = values.find(lossName);
  auto lossType = loss == values.end()
                      ? RankedTensorType()
                      : dyn_cast<RankedTensorType>(loss->second.getType());
  if (!lossType || lossType.getRank() != 0 ||
      !lossType.getElementType().isF32()) {
    (void)fail("the first graph output '" + lossName +
               "' must be the loss, a scalar FLOAT computed from the inputs; "
               "export a module whose forward returns the loss");
    return nullptr;
  }
  SmallVector<Value> extra;
  SmallVector<StringRef> extraNames;
  for (int i = 1; i < graph.output_size(); ++i) {
    const std::string &name = graph.output(i).name();
    auto it = values.find(name);
    if (it == values.end() || !isIdentifier(name) ||
        !isa<FloatType>(getElementTypeOrSelf(it->second.getType()))) {
      (void)fail("graph output '" + name +
                 "' cannot be an extra output: it must be a computed float "
                 "tensor named by an identifier (pass output_names)");
      return nullptr;
    }
    extra.push_back(it->second);
    extraNames.push_back(name);
  }
  builder.setInsertionPointToEnd(&modelOp.getBody().front());
  mpc::OutputOp::create(builder, loss->second.getLoc(), loss->second, extra,
                        ValueRange(), builder.getStrArrayAttr(extraNames));

  // A translation that broke an op's constraint is reported at the node.
  if (failed(verify(modelOp)))
    return nullptr;
  return owned.release();
}

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
      define(node, mpc::DropoutOp::create(
                       builder, location, input.getType(), input,
                       builder.getF64FloatAttr(*ratio), IntegerAttr()));
    return success();
  }
  if (type == "Erf")
    return fail(node, "Erf outside GELU's x * 0.5 * (1 + erf(x / sqrt(2))) "
                      "is not supported (mpc has gelu, not erf)");
  return unsupported(node, "the operator " + type);
}

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
      for (const auto &dim : it->second->tensor_type().shape().dim()) {
        if (!dim.has_dim_value())
          return fail(node, "the shape of '" + node.input(0) +
                                "' is not static; mpc needs static shapes");
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
        out.push_back(static_cast<int64_t>(v));
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
  if (type == "Add" || type == "Sub" || type == "Mul" || type == "Div") {
    if (inputs.size() != 2 || !inputs[1])
      return std::nullopt;
    char op = type == "Add"   ? '+'
              : type == "Sub" ? '-'
              : type == "Mul" ? '*'
                              : '/';
    return finish(broadcast(
        {&a, inputs[1]},
        [&](ArrayRef<double> x) {
          double value = op == '+'   ? x[0] + x[1]
                         : op == '-' ? x[0] - x[1]
                         : op == '*' ? x[0] * x[1]
                                     : x[0] / x[1];
          if (integer && op == '/')
            value = std::floor(value);
          return integer || a.type == TensorProto::DOUBLE
                     ? value
                     : static_cast<double>(static_cast<float>(value));
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
      if (steps[k] <= 0)
        return unsupported(node, "a constant slice with a step <= 0");
      int64_t s = starts[k] < 0 ? starts[k] + extent : starts[k];
      int64_t e = ends[k] < 0 ? ends[k] + extent : ends[k];
      s = std::clamp<int64_t>(s, 0, extent);
      e = std::clamp<int64_t>(e, 0, extent);
      begin[d] = s;
      step[d] = steps[k];
      result.shape[d] = e > s ? (e - s + steps[k] - 1) / steps[k] : 0;
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
  return std::nullopt;
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
    return llvm::map_to_vector(
        known->values, [](double v) { return static_cast<int64_t>(v); });
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

LogicalResult Importer::translateGather(const NodeProto &node) {
  Value table = operand(node, 0);
  if (!table)
    return failure();
  RankedTensorType result = resultType(node);
  if (!result)
    return failure();
  auto tableType = cast<RankedTensorType>(table.getType());
  if (axis(intAttribute(node, "axis", 0), tableType.getRank()) != 0 ||
      tableType.getRank() != 2)
    return unsupported(node, "Gather other than rows of a 2-d table "
                             "(nn.Embedding)");
  // Rows 0..n-1 of the table (a position embedding of arange) are a slice.
  if (const Constant *indices = constant(node.input(1))) {
    bool arange = indices->shape.size() == 1;
    for (size_t i = 0; arange && i < indices->values.size(); ++i)
      arange = indices->values[i] == static_cast<double>(i);
    if (!arange)
      return unsupported(node, "Gather of constant indices other than "
                               "0, 1, ..., n-1");
    define(node,
           mpc::SliceOp::create(builder, location, result, table,
                                builder.getDenseI64ArrayAttr({0, 0}),
                                builder.getDenseI64ArrayAttr(
                                    {indices->size(), tableType.getDimSize(1)}),
                                DenseI64ArrayAttr()));
    return success();
  }
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

LogicalResult Importer::translatePool(const NodeProto &node) {
  Value input = operand(node, 0);
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
  if (intAttribute(node, "ceil_mode", 0))
    return unsupported(node, "ceil_mode");
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
  bool padded = pads[0] || pads[1];
  if (node.op_type() == "AveragePool" && padded &&
      !intAttribute(node, "count_include_pad", 0))
    return unsupported(node, "average pooling with padding that does not "
                             "count towards the divisor (count_include_pad="
                             "False)");
  auto kernelAttr = builder.getDenseI64ArrayAttr(kernel);
  auto strideAttr = builder.getDenseI64ArrayAttr(strides);
  auto padAttr = padded ? builder.getDenseI64ArrayAttr({pads[0], pads[1]})
                        : DenseI64ArrayAttr();
  if (node.op_type() == "MaxPool")
    define(node, mpc::MaxPool2dOp::create(builder, location, result, input,
                                          kernelAttr, strideAttr, padAttr));
  else
    define(node, mpc::AvgPool2dOp::create(builder, location, result, input,
                                          kernelAttr, strideAttr, padAttr));
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
             builder, location, operands[0].getType(), operands[0], operands[1],
             operands[2], operands[3], operands[4],
             builder.getF64FloatAttr(momentum), builder.getF64FloatAttr(eps)));
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
    axes = llvm::map_to_vector(
        known->values, [](double v) { return static_cast<int64_t>(v); });
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

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

LogicalResult Importer::writeWeights(StringRef path) {
  std::vector<std::vector<float>> storage;
  std::vector<mpcrt::safetensors_tensor> tensors;
  storage.reserve(paramNames.size() + stateNames.size());
  for (const auto *names : {&paramNames, &stateNames})
    for (const std::string &name : *names) {
      const TensorProto &initializer = *initializers[name];
      Constant known;
      if (std::optional<std::string> error = readTensor(initializer, known))
        return fail("initializer '" + name + "': " + *error);
      storage.emplace_back(known.values.begin(), known.values.end());
      tensors.push_back(
          {name, MPC_F32,
           std::vector<int64_t>(known.shape.begin(), known.shape.end()),
           storage.back().data()});
    }
  std::string file = path.str();
  if (mpcrt::write_safetensors(
          file.c_str(), tensors,
          {{"format", "pt"}, {"source", options.inputFile}}) != MPC_OK)
    return fail("cannot write the weights to '" + file +
                "': " + mpc_last_error());
  return success();
}

} // namespace

int mlir::mpc::runImport(const ImportOptions &options) {
  auto fail = [&](const Twine &message) {
    llvm::errs() << "mpc import: error: " << options.inputFile << ": "
                 << message << "\n";
    return 1;
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(options.inputFile, /*IsText=*/false);
  if (std::error_code ec = buffer.getError())
    return fail("cannot read it: " + ec.message());

  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return fail("not an ONNX model: the protobuf does not parse (a truncated "
                "or corrupted file?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return fail("not an ONNX model: it has no graph (a truncated or "
                "corrupted file?)");

  int64_t opset = -1;
  for (const onnx::OperatorSetIdProto &import : model.opset_import())
    if (import.domain().empty() || import.domain() == "ai.onnx")
      opset = import.version();
  if (opset < 0)
    return fail("it imports no default-domain opset");
  if (opset > kMaxOpset)
    return fail("opset " + Twine(opset) + " is newer than " + Twine(kMaxOpset) +
                ", the newest mpc import reads; export "
                "with opset_version=" +
                Twine(kMaxOpset));
  if (opset < kMinOpset)
    return fail("opset " + Twine(opset) + " is older than " + Twine(kMinOpset) +
                ", the oldest mpc import reads; export "
                "with opset_version=" +
                Twine(kMaxOpset));

  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions inference(/*check_type=*/true,
                                          /*error_mode=*/1,
                                          /*enable_data_propagation=*/true);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &error) {
    // Messages can span lines; the first says what is wrong.
    std::string message = error.what();
    return fail("the ONNX checker rejects it: " +
                StringRef(message).trim().split('\n').first);
  }

  DialectRegistry registry;
  registry.insert<mpc::MpcDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  // A verifier message names the node through its location.
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    std::string where;
    diagnostic.getLocation()->walk([&](Location inner) {
      if (auto name = dyn_cast<NameLoc>(inner)) {
        where = "node '" + name.getName().str() + "': ";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    llvm::errs() << "mpc import: error: " << options.inputFile << ": " << where
                 << diagnostic.str() << "\n";
    return success();
  });

  Importer importer(model, options, opset, context);
  OwningOpRef<mpc::ModelOp> result(importer.translate());
  if (!result)
    return 1;
  if (!options.weightsFile.empty() &&
      failed(importer.writeWeights(options.weightsFile)))
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(options.outputFile, &error);
  if (!output)
    return fail(error);
  output->os() << "// Imported by mpc import from " << options.inputFile
               << " (ONNX opset " << opset;
  if (!model.producer_name().empty())
    output->os() << ", written by " << model.producer_name() << " "
                 << model.producer_version();
  output->os() << ").\n// Each op's loc names its ONNX node; line N of the "
                  ".onnx file is the graph's Nth node.\n";
  result->print(output->os(),
                OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                  /*prettyForm=*/false));
  output->os() << "\n";
  output->keep();
  return 0;
}

#endif // MPC_HAVE_ONNX
