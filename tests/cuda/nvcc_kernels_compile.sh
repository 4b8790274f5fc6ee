#!/bin/sh
# Compiles the CUDA kernels mpc generates for a model with nvcc, warnings as
# errors: the cpu target runs the same source, so it must stay valid CUDA.
#
#   nvcc_kernels_compile.sh build <dir> <mpc> <nvcc> <repo root> <model.mlir> <sm_XX> [mpc options]
#   nvcc_kernels_compile.sh check <dir> <model.mlir> <sm_XX> [mpc options]
#
# As kernels_compile.sh: `build` (run by the build) compiles into <dir> and
# keeps the log and exit status; `check` (the test) reads them.
set -eu
mode=$1 out=$2
shift 2
case $mode in
build)
  mpc=$1 nvcc=$2 root=$3 model=$4 arch=$5
  shift 5
  rm -rf "$out"
  mkdir -p "$out"
  status=0
  { "$mpc" compile "$model" --emit=kernels "$@" > "$out/kernels.cu" &&
    "$nvcc" -arch="$arch" -cubin -Werror all-warnings -I"$root" \
      -o "$out/kernels.cubin" "$out/kernels.cu"; } >"$out/log" 2>&1 ||
    status=$?
  echo "$status" > "$out/status"
  exit 0 ;;
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
