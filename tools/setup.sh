#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for mpc and builds it; safe to run again.
#   tools/setup.sh              install what is missing, configure, build
#   BUILD_DIR=out tools/setup.sh   build somewhere other than ./build
#   tools/setup.sh --sanitize   also build the compiler, the runtime, the unit
#                               tests and the example apps with ASan and UBSan
#                               in build/sanitize, which the tests labelled
#                               `sanitize` run
set -euo pipefail

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "setup: unknown option '$arg' (--sanitize is the one there is)" >&2
       exit 2 ;;
  esac
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$repo/build}

# Everything the build and the tests use. LLVM's exported CMake targets name
# zstd, zlib, libedit, libxml2, curl and libffi, so their -dev packages must be
# present for find_package(MLIR) to configure; libmpcrt uses zlib too
# (checkpoint checksums).
packages=(
  cmake ninja-build g++ python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22
  libzstd-dev zlib1g-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  libffi-dev libz3-dev
  libfmt-dev libgtest-dev nlohmann-json3-dev
  # the Python package's tests (tools/python/mpc); pkg-config for the
  # installed package's test
  python3-numpy pkg-config
  # `mpc import` (ONNX 1.12 and protobuf); its tests export PyTorch models
  # and check them with the onnx package
  libonnx-dev libprotobuf-dev python3-onnx python3-torch python3-torchvision
  # data parallelism on the cpu target: libmpcrt loads libmpi with dlopen;
  # the tests start ranks with mpirun; jobs started the torchrun way
  # (RANK, WORLD_SIZE) run on Gloo, through a plugin libmpcrt loads
  openmpi-bin libgloo-dev
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

sanitize_dir=""
[ "$sanitize" -eq 1 ] && sanitize_dir=$build_dir/sanitize
cmake -S "$repo" -B "$build_dir" -G Ninja \
  -DMPC_SANITIZE_BUILD_DIR="$sanitize_dir"
cmake --build "$build_dir"

if [ -n "$sanitize_dir" ]; then
  # What tests/sanitize/CMakeLists.txt runs, and nothing more.
  cmake -S "$repo" -B "$sanitize_dir" -G Ninja -DMPC_SANITIZE=ON
  cmake --build "$sanitize_dir" --target mpc mpc-opt mpc-fuzz \
    mpc-runtime-tests mpc-compiler-tests train_mlp train_mlp_O2_f16 \
    train_gpt train_resnet train_gpt_lean_none train_gpt_lean_kahan
fi
