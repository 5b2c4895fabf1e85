#!/usr/bin/env bash
# Assembles, in .gpu-bundle/ (git-ignored), what a GPU machine without a
# package registry lacks to build and check Fairway (scripts/gpu_check.sh):
#   root/      Debian's UCX, hwloc and GoogleTest packages (runtime and
#              development), unpacked with dpkg -x, docs dropped;
#   ucx-cu13/  the libucx-cu13 wheel's UCX 1.22 (CUDA-aware: cuda_copy,
#              cuda_ipc), shared libraries only, debug sections stripped;
#   MANIFEST   what is in it, with versions.
# Prints the bundle's size and that of the working tree that travels with
# it, and fails if the two exceed the device machine's 64 MiB.
#   bash scripts/gpu_bundle.sh [--limit-mib N]
set -euo pipefail
cd "$(dirname "$0")/.."

limit_mib=64
case "${1:-}" in
  --limit-mib) limit_mib=$2 ;;
  "") ;;
  *) echo "usage: $0 [--limit-mib N]" >&2; exit 2 ;;
esac

bundle=.gpu-bundle
# Runtime and development packages; the runtime libraries UCX needs that a
# CUDA machine image may not have (verbs, rdmacm, numa, netlink) come too.
packages=(libucx0 libucx-dev libibverbs1 librdmacm1 libnuma1 libnl-3-200 libnl-route-3-200
          libhwloc15 libhwloc-dev libgtest-dev)
ucx_wheel=libucx-cu13==1.22.0

rm -rf "$bundle"
mkdir -p "$bundle/root" "$bundle/debs"
echo "gpu_bundle: downloading ${packages[*]}"
if ! (cd "$bundle/debs" && apt-get download -qq "${packages[@]}" 2>/dev/null); then
  apt-get update -qq
  (cd "$bundle/debs" && apt-get download -qq "${packages[@]}")
fi
{
  echo "# Fairway GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "## Debian packages (unpacked in root/)"
} > "$bundle/MANIFEST"
for deb in "$bundle"/debs/*.deb; do
  dpkg -x "$deb" "$bundle/root"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >> "$bundle/MANIFEST"
done
rm -rf "$bundle/debs" "$bundle/root/usr/share/doc" "$bundle/root/usr/share/man" "$bundle/root/usr/share/lintian" \
       "$bundle/root/usr/share/doc-base"
# Fairway links UCX and hwloc dynamically; only GoogleTest's archives are needed.
find "$bundle/root" -name '*.a' ! -name 'libgtest*.a' -delete
find "$bundle/root" -name '*.la' -delete

# The CUDA-aware UCX: the copy scripts/setup.sh unpacked, else the wheel itself.
wheel_dir=.whl/libucx-cu13
if [ ! -f "$wheel_dir/lib/cmake/ucx/ucx-config.cmake" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary :all: -d "$tmp" "$ucx_wheel"
  unzip -q "$tmp"/libucx_cu13-*.whl 'libucx/*' -d "$tmp"
  wheel_dir=$tmp/libucx
fi
ucx=$bundle/ucx-cu13
mkdir -p "$ucx/lib/ucx" "$ucx/bin"
cp -r "$wheel_dir/include" "$wheel_dir/etc" "$ucx/"
cp -r "$wheel_dir/lib/cmake" "$ucx/lib/"
cp "$wheel_dir/bin/ucx_info" "$ucx/bin/"
# Wheels hold no symbolic links: each library is there three times
# (.so, .so.0, .so.0.0.0). Keep the soname the loader asks for and the
# name the CMake package and UCX's module loader use; no perftest module.
for lib in "$wheel_dir"/lib/lib*.so.0 "$wheel_dir"/lib/ucx/lib*.so.0; do
  case "$lib" in *perftest*) continue ;; esac
  rel=${lib#"$wheel_dir"/}
  cp "$lib" "$ucx/$rel"
  strip --strip-debug "$ucx/$rel"
  cp "$ucx/$rel" "$ucx/${rel%.0}"
done
echo "## libucx-cu13 (in ucx-cu13/): UCX $(cat "$wheel_dir/UCX_WHEEL_VERSION.txt" 2>/dev/null || echo "${ucx_wheel#*==}")," \
     "modules: $(cd "$ucx/lib/ucx" && ls ./*.so | sed 's|^\./lib||; s|\.so$||' | tr '\n' ' ')" >> "$bundle/MANIFEST"

bundle_bytes=$(du -sb "$bundle" | cut -f1)
# What travels besides: tracked files and untracked ones git does not ignore.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
             awk '{s += $1} END {print s + 0}')
total=$((bundle_bytes + tree_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu_bundle: $bundle is $(mib "$bundle_bytes"); with the working tree ($(mib "$tree_bytes")), $(mib "$total") travels" \
     "(limit ${limit_mib} MiB)"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu_bundle: over the limit" >&2
  exit 1
fi
