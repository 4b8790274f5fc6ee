# -*- Python -*-
# lit configuration for mpc, modelled on mlir/examples/standalone/test/lit.cfg.py.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "mpc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mpc_obj_root, "tests")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mpc_src_root", config.mpc_src_root))
config.substitutions.append(("%examples", os.path.join(config.mpc_src_root, "examples")))
# Tests of `mpc compile --target=cuda` carry `REQUIRES: nvrtc`.
if config.mpc_have_nvrtc:
    config.available_features.add("nvrtc")
# Tests of `mpc import` carry `REQUIRES: onnx`; they write their ONNX
# inputs with Debian's python3-onnx.
if config.mpc_have_onnx:
    config.available_features.add("onnx")
config.substitutions.append(("%debian_python", "/usr/bin/python3"))
# Tests that export PyTorch models carry `REQUIRES: torch` (Debian's
# python3-torch; found without importing it, which takes seconds).
import subprocess
if subprocess.run(["/usr/bin/python3", "-c",
                   "import importlib.util, sys; "
                   "sys.exit(importlib.util.find_spec('torch') is None)"],
                  stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("torch")
# Catch a FileCheck variable reused across CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
# The libraries the tests build are checked, rarely run: the host compiler
# unoptimised takes a third of the time (as the fuzzer's and the cuda
# tests' builds).
config.environment["CXXFLAGS"] = "-O0"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.mpc_tools_dir, config.llvm_tools_dir]
# `not` too: use_default_substitutions() only rewrites it after a pipe.
tools = ["mpc-opt", "mpc", "not"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
