#!/bin/sh
# Compiles the CUDA kernels mpc generates for a model with nvcc, warnings as
# errors: the cpu target runs the same source, so it must stay valid CUDA.
#   nvcc_kernels_compile.sh <mpc> <nvcc> <repo root> <model.mlir> <sm_XX> [mpc options]
set -eu
mpc=$1 nvcc=$2 root=$3 model=$4 arch=$5
shift 5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mpc" compile "$model" --emit=kernels "$@" > "$out/kernels.cu"
"$nvcc" -arch="$arch" -cubin -Werror all-warnings -I"$root" \
  -o "$out/kernels.cubin" "$out/kernels.cu"
echo "$(basename "$model") $* compiles for $arch"
