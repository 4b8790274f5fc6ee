#!/bin/sh
# Compiles the CUDA kernels mpc generates for a model with nvcc, warnings as
# errors: the cpu target runs the same source, so it must stay valid CUDA.
#
#   nvcc_kernels_compile.sh build <dir> <mpc> <nvcc> <repo root> <model.mlir> <sm_XX> [mpc options]
#   nvcc_kernels_compile.sh check <dir> <model.mlir> <sm_XX> [mpc options]
#
# The build runs `build` under tests/record_status.sh, which keeps its
# output and exit status in <dir>; `check` (the test) reads them.
set -eu
mode=$1 out=$2
shift 2
case $mode in
build)
  mpc=$1 nvcc=$2 root=$3 model=$4 arch=$5
  shift 5
  "$mpc" compile "$model" --emit=kernels "$@" > "$out/kernels.cu"
  exec "$nvcc" -arch="$arch" -cubin -Werror all-warnings -I"$root" \
    -o "$out/kernels.cubin" "$out/kernels.cu" ;;
check)
  model=$1 arch=$2
  shift 2 ;;
*)
  echo "nvcc_kernels_compile.sh: unknown mode '$mode' (build or check)" >&2
  exit 2 ;;
esac

[ -f "$out/status" ] ||
  { echo "error: $out was not built (run the build first)"; exit 1; }
status=$(cat "$out/status")
if [ "$status" -ne 0 ] || [ ! -s "$out/kernels.cubin" ]; then
  cat "$out/log"
  echo "error: mpc --emit=kernels or nvcc exited with $status"
  exit 1
fi
echo "$(basename "$model") $* compiles for $arch with nvcc, no warnings"
