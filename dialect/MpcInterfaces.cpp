//===- MpcInterfaces.cpp - mpc op interfaces ----------------------*- C++ -*-===//
//
// This file implements the generated parts of PrecisionPolicyOpInterface.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcInterfaces.h"

#include "dialect/MpcInterfaces.cpp.inc"
