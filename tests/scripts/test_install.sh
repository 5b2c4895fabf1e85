#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds docs/example against it
# with find_package(Fairway), checks the pkg-config file, and runs the
# example on 3 ranks with the installed fairwayrun.
set -euo pipefail
build_dir=$1
source_dir=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build_dir" --prefix "$prefix" > /dev/null
test -f "$prefix/include/fairway/fairway.h"
test -f "$prefix/include/fairway/fairway.hpp"
ls "$prefix"/lib*/fairway/libfairway-transport-ucx.so > /dev/null
libdir=$(dirname "$(ls "$prefix"/lib*/libfairway.so)")
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exact-version=0.1.0 fairway
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --libs fairway | grep -- "-lfairway" >/dev/null
cmake -S "$source_dir/docs/example" -B "$prefix/example" -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$prefix/example" > /dev/null
"$prefix/bin/fairwayrun" -np 3 "$prefix/example/allreduce_example"
