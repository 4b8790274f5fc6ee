#!/bin/sh
# Builds a model's library for the cuda target, which compiles every
# generated kernel with NVRTC for one architecture, and checks that NVRTC
# did not warn, and that the image holds one entry per kernel of the source
# and PTX for that architecture.
#   kernels_compile.sh <mpc> <model.mlir> <sm_XX> [mpc options]
set -eu
mpc=$1 model=$2 arch=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mpc" compile "$model" --target=cuda --arch="$arch" -o "$out" "$@" 2>"$out/log" ||
  { cat "$out/log"; exit 1; }
# Generated kernels compile without a warning (as with nvcc -Werror before).
if grep -q ": warning: NVRTC" "$out/log"; then
  cat "$out/log"
  exit 1
fi
name=$(basename "$out"/*_kernels.cu _kernels.cu)
kernels=$(grep -c '^__global__ void ' "$out/${name}_kernels.cu")
entries=$(grep -c '^  {"' "$out/${name}_cuda_image.cpp")
if [ "$kernels" -ne "$entries" ] || [ "$kernels" -eq 0 ]; then
  echo "error: $kernels kernels in the source, $entries in the image"
  exit 1
fi
grep -q "^\.target $arch\$" "$out/$name.ptx" ||
  { echo "error: $name.ptx is not for $arch"; exit 1; }
echo "$(basename "$model") $* for $arch: $kernels kernels compiled by NVRTC"
