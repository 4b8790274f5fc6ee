#!/bin/sh
# The installed package, used as an outside project would use it:
#   outside_project.sh <cmake> <mpc build dir> <tests/package dir> <c++>
# installs the build into a fresh prefix, then (1) configures, builds and
# runs tests/package/outside (find_package(mpc), mpc_add_model; the loss
# must fall) against that prefix alone, and (2) builds the same model with
# the installed mpc and links it with pkg-config's flags, without CMake.
set -eu
cmake=$1 build=$2 here=$3 cxx=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log"
# Nothing of the package may point back into the build or source tree.
if grep -rl -e "$build" -e "$(dirname "$(dirname "$here")")/runtime" \
     "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  echo "error: the installed package names the build or source tree"
  exit 1
fi

echo "== CMake: find_package(mpc)"
"$cmake" -S "$here/outside" -B "$work/outside" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/outside" > "$work/build.log" ||
  { cat "$work/build.log"; exit 1; }
"$work/outside/train_outside"

echo "== pkg-config"
"$prefix/bin/mpc" compile "$here/outside/model.mlir" --lr=0.5 -o "$work/model"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046 # the flags are words
"$cxx" -std=c++17 "$here/outside/train.cpp" -I"$work/model" \
  "$work/model/liboutside.a" $(pkg-config --cflags --libs mpc) \
  -o "$work/train_pkgconfig"
"$work/train_pkgconfig"
echo "the installed package works from CMake and from pkg-config"
