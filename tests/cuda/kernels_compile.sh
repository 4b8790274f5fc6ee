#!/bin/sh
# Checks a model's library for the cuda target, whose build compiled every
# generated kernel with NVRTC for one architecture: that neither
# NVRTC nor ptxas's resource report (mpc warns of spills, a stack frame, and
# registers or shared memory beyond what the kernel's launch bounds allow)
# gave a warning, that the image holds one entry per kernel of the source
# and PTX for that architecture, and that every kernel declares its launch
# bounds and has its resources and theoretical occupancy in
# <name>_kernels.resources.
#
#   kernels_compile.sh <dir> <model.mlir> <sm_XX> [mpc options]
#
# The build compiles into <dir>/lib (tests/cuda/CMakeLists.txt), keeping
# mpc's output and exit status with tests/record_status.sh; this script,
# the test, checks what it left.
set -eu
out=$1 model=$2 arch=$3
shift 3

[ -f "$out/status" ] ||
  { echo "error: $out was not built (run the build first)"; exit 1; }
status=$(cat "$out/status")
if [ "$status" -ne 0 ]; then
  cat "$out/log"
  echo "error: mpc compile exited with $status"
  exit 1
fi
# Generated kernels compile without a warning (as with nvcc -Werror before).
if grep -q ": warning: \(NVRTC\|ptxas\)" "$out/log"; then
  cat "$out/log"
  exit 1
fi
lib=$out/lib
name=$(basename "$lib"/*_kernels.cu _kernels.cu)
kernels=$(grep -c '^__global__ void ' "$lib/${name}_kernels.cu")
entries=$(grep -c '^  {"' "$lib/${name}_cuda_image.cpp")
if [ "$kernels" -ne "$entries" ] || [ "$kernels" -eq 0 ]; then
  echo "error: $kernels kernels in the source, $entries in the image"
  exit 1
fi
# __launch_bounds__(N), or (N, M) where a kernel asks for M blocks an SM.
bounded=$(grep -cE '^__global__ void __launch_bounds__\([0-9]+(, [0-9]+)?\) ' \
  "$lib/${name}_kernels.cu")
if [ "$bounded" -ne "$kernels" ]; then
  echo "error: $bounded of $kernels kernels declare __launch_bounds__"
  exit 1
fi
# A header, then one line per kernel with its bound and registers (ptxas's).
resources=$(awk -F'\t' 'NR > 1 && $2 > 0 && $3 > 0' "$lib/${name}_kernels.resources" | wc -l)
if [ "$resources" -ne "$kernels" ]; then
  echo "error: $resources of $kernels kernels have resources from ptxas"
  cat "$lib/${name}_kernels.resources"
  exit 1
fi
# And each one's theoretical occupancy (cuda_occupancy.h) for its bound.
occupied=$(awk -F'\t' 'NR > 1 && $8 > 0 && $9 > 0' "$lib/${name}_kernels.resources" | wc -l)
if [ "$occupied" -ne "$kernels" ]; then
  echo "error: $occupied of $kernels kernels have a theoretical occupancy"
  cat "$lib/${name}_kernels.resources"
  exit 1
fi
grep -q "^\.target $arch\$" "$lib/$name.ptx" ||
  { echo "error: $name.ptx is not for $arch"; exit 1; }
[ -f "$lib/lib$name.a" ] ||
  { echo "error: no lib$name.a: the cuda host code did not build"; exit 1; }
most=$(awk -F'\t' 'NR > 1 && $3 > r { r = $3; k = $1 } END { print r " registers (" k ")" }' "$lib/${name}_kernels.resources")
least=$(awk -F'\t' 'NR > 1 && (l == "" || $9 < l) { l = $9; k = $1; why = $10 } END { print l "% occupancy (" k ", by " why ")" }' "$lib/${name}_kernels.resources")
echo "$(basename "$model") $* for $arch: $kernels kernels compiled by NVRTC, no spills or stack frames, at most $most, at least $least"
