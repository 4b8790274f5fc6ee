//===- Graph.cpp - the ONNX graph as an mpc.model -------------------------===//
//
// The graph: its initializers classified as parameters, state or constants,
// node order and consumers, the model built and verified, and the weights
// written as safetensors.
//
// Compiled with exceptions, as the rest of the importer: libonnx reports
// through them.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "runtime/safetensors.h"

#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mlir::mpc::onnx_import {

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

void Importer::indexTypes() {
  types.clear();
  for (const onnx::ValueInfoProto &info : graph.input())
    types[info.name()] = &info.type();
  for (const onnx::ValueInfoProto &info : graph.value_info())
    types[info.name()] = &info.type();
  for (const onnx::ValueInfoProto &info : graph.output())
    types[info.name()] = &info.type();
}

void Importer::indexGraph() {
  for (const TensorProto &initializer : graph.initializer())
    initializers[initializer.name()] = &initializer;
  indexTypes();
  for (const onnx::ValueInfoProto &info : graph.output())
    graphOutputs.insert(info.name());
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
    if (!mpc::isTensorName(name))
      return fail("initializer '" + name +
                  "' cannot name a parameter: names are of the form "
                  "[A-Za-z_][A-Za-z0-9_.-]*; give the module a named "
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

/// Why `node`'s output has no static shape when its float inputs have one:
/// an integer input (a shape, a bound, an index) that the constant evaluator
/// could not work out, because it is computed from the model's inputs.
static std::string runTimeIntegerInputs(
    const NodeProto &node,
    const std::map<std::string, const onnx::TypeProto *> &types,
    llvm::function_ref<bool(const std::string &)> known) {
  std::string reasons;
  for (const std::string &input : node.input()) {
    auto it = types.find(input);
    if (input.empty() || known(input) || it == types.end() ||
        !it->second->has_tensor_type())
      continue;
    int32_t element = it->second->tensor_type().elem_type();
    if (element != TensorProto::INT64 && element != TensorProto::INT32)
      continue;
    reasons += (reasons.empty() ? ": its input '" : ", '") + input + "' (" +
               typeName(element) + ")";
  }
  if (!reasons.empty())
    reasons += " is computed from the model's inputs at run time, not at "
               "import";
  return reasons;
}

RankedTensorType Importer::resultType(const NodeProto &node, int index) {
  const std::string &name = node.output(index);
  auto it = types.find(name);
  auto isKnown = [&](const std::string &input) {
    return constant(input) != nullptr;
  };
  bool shaped = it != types.end() && it->second->has_tensor_type() &&
                it->second->tensor_type().has_shape();
  bool staticExtents =
      shaped && llvm::all_of(it->second->tensor_type().shape().dim(),
                             [](const onnx::TensorShapeProto_Dimension &dim) {
                               return dim.has_dim_value() &&
                                      dim.dim_value() > 0;
                             });
  if (!staticExtents) {
    std::string why = runTimeIntegerInputs(node, types, isKnown);
    if (!why.empty()) {
      (void)fail(node, "output '" + name + "' has no static shape" + why +
                           "; mpc needs static shapes");
      return nullptr;
    }
  }
  if (!shaped) {
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
    if (!mpc::isTensorName(input.name()))
      return fail("graph input '" + input.name() +
                  "' cannot name a model input: names are of the form "
                  "[A-Za-z_][A-Za-z0-9_.-]*; pass input_names to "
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
  if (failed(foldConstants()))
    return nullptr;
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

LogicalResult Importer::foldConstants() {
  while (true) {
    bool folded = false;
    for (int i = 0; i < graph.node_size(); ++i) {
      if (done[i])
        continue;
      location = locationOf(i);
      if (std::optional<LogicalResult> result = foldConstant(graph.node(i))) {
        if (failed(*result))
          return failure();
        done[i] = folded = true;
      }
    }
    // ONNX inferred shapes before any of this was known: a value computed
    // from an evaluated one (a Slice whose ends come from Shape arithmetic,
    // as nn.MultiheadAttention splits its packed projection) may have none.
    auto lacksShape = [&](const std::string &name) {
      auto it = types.find(name);
      return it == types.end() || !it->second->has_tensor_type() ||
             !it->second->tensor_type().has_shape() ||
             llvm::any_of(it->second->tensor_type().shape().dim(),
                          [](const onnx::TensorShapeProto_Dimension &dim) {
                            return !dim.has_dim_value();
                          });
    };
    bool unshaped = false;
    for (int i = 0; i < graph.node_size() && !unshaped; ++i)
      if (!done[i])
        unshaped = llvm::any_of(graph.node(i).output(), lacksShape);
    if (!folded || !unshaped)
      return success();
    if (failed(inferShapesFromConstants()))
      return failure();
  }
}

/// `known` as an ONNX tensor, or nothing for an element type the shape
/// arithmetic does not produce.
static std::optional<TensorProto> tensorOf(const Constant &known) {
  TensorProto tensor;
  tensor.set_data_type(known.type);
  for (int64_t extent : known.shape)
    tensor.add_dims(extent);
  for (double value : known.values) {
    switch (known.type) {
    case TensorProto::INT64:
      tensor.add_int64_data(saturatingInt64(value));
      break;
    case TensorProto::INT32:
    case TensorProto::BOOL:
      tensor.add_int32_data(static_cast<int32_t>(value));
      break;
    case TensorProto::FLOAT:
      tensor.add_float_data(static_cast<float>(value));
      break;
    case TensorProto::DOUBLE:
      tensor.add_double_data(value);
      break;
    default:
      return std::nullopt;
    }
  }
  return tensor;
}

LogicalResult Importer::inferShapesFromConstants() {
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto &node = graph.node(i);
    if (!done[i] || node.op_type() == "Constant" || node.output_size() != 1)
      continue;
    const Constant *known = constant(node.output(0));
    if (!known)
      continue;
    std::optional<TensorProto> value = tensorOf(*known);
    if (!value)
      continue;
    // In place: node indices are the ops' locations.
    NodeProto replacement;
    replacement.set_name(node.name());
    replacement.set_op_type("Constant");
    replacement.add_output(node.output(0));
    onnx::AttributeProto *attribute = replacement.add_attribute();
    attribute->set_name("value");
    attribute->set_type(onnx::AttributeProto::TENSOR);
    *attribute->mutable_t() = std::move(*value);
    graph.mutable_node(i)->CopyFrom(replacement);
  }
  try {
    onnx::ShapeInferenceOptions inference(/*check_type=*/true,
                                          /*error_mode=*/1,
                                          /*enable_data_propagation=*/false);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &error) {
    std::string message = error.what();
    return fail("ONNX shape inference, run again with the evaluated "
                "constants, rejects the graph: " +
                StringRef(message).trim().split('\n').first);
  }
  indexTypes();
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

} // namespace mlir::mpc::onnx_import
