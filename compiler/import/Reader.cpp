//===- Reader.cpp - ONNX tensors and attributes ---------------------------===//
//
// The importer's reading of the protobuf: initializer and Constant tensors
// as values, node attributes, and names made identifiers.
//
// Compiled with exceptions, as the rest of the importer: libonnx reports
// through them.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/Importer.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <charconv>
#include <cmath>
#include <cstring>

using namespace mlir;

namespace mlir::mpc::onnx_import {

std::string typeName(int32_t type) {
  return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
}

bool isFloatType(int32_t type) {
  return type == TensorProto::FLOAT || type == TensorProto::FLOAT16 ||
         type == TensorProto::BFLOAT16 || type == TensorProto::DOUBLE;
}

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

} // namespace mlir::mpc::onnx_import
