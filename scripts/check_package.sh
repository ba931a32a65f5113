#!/usr/bin/env bash
# Builds the Debian package with CPack, unpacks it into a temporary root, and runs the installed
# binaries from there: `grpo --version`, `grpo inspect model` on the packaged demo model, and
# `grpo-studio --version` (offscreen) when the app is built. Also checks the package's declared
# dependencies and that the desktop entry, AppStream metainfo, icon, demo model and presets are
# in it. Usage: scripts/check_package.sh [BUILD_DIR]   (default: build/package; JOBS=2)
# NO_BUILD=1: package what BUILD_DIR already holds (its installed targets must be built and it must
# be configured with -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON, or cpack builds everything first).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build/package}"
JOBS="${JOBS:-2}"
APP_ID="io.github.grpo_studio.GrpoStudio"

fail() { echo "check_package: FAIL: $*" >&2; exit 1; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRPO_BUILD_TESTS=OFF \
    -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
fi
prefix="$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$BUILD/CMakeCache.txt")"
p="${prefix#/}"   # the prefix inside the unpacked root
# cpack builds the default target (what gets installed) before it installs into its staging root.
if [ -z "${NO_BUILD:-}" ]; then
  nice -n 10 cmake --build "$BUILD" -j"$JOBS"
fi
rm -f "$BUILD"/grpo-studio_*.deb
(cd "$BUILD" && cpack -G DEB --config CPackConfig.cmake >/dev/null)
deb="$(ls "$BUILD"/grpo-studio_*.deb | head -n1)"
[ -f "$deb" ] || fail "no .deb produced in $BUILD"
echo "package: $deb ($(du -h "$deb" | cut -f1))"

depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
# The packages of the libraries grpo links on this machine, as dpkg knows them: libtorch1.13 and
# libqt6core6 on Debian 12, libtorch2.6 and libqt6core6t64 on Debian 13 (a name written here once
# failed the check on Debian 13).
for lib in libtorch.so libyaml-cpp.so libQt6Core.so libQt6Network.so; do
  path="$(ldd "$BUILD/app/grpo" | awk -v l="$lib" 'index($1, l) == 1 && !found { print $3; found = 1 }')"
  [ -n "$path" ] || fail "$BUILD/app/grpo does not link $lib"
  # (awk reads every line, and without `exit`: a reader that stops early is a SIGPIPE, which
  # pipefail turns into a silent exit of this script)
  pkg="$({ dpkg -S "$(readlink -f "$path")" 2>/dev/null || true; } | awk -F: 'NR == 1 { print $1 }')"
  [ -n "$pkg" ] || fail "no installed package owns $(readlink -f "$path") ($lib)"
  grep -qw -- "$pkg" <<<"$depends" || fail "Depends lacks $pkg (the package of $lib, which grpo links)"
done

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
dpkg-deb -x "$deb" "$root"
for f in "$p/bin/grpo" \
         "$p/share/applications/$APP_ID.desktop" \
         "$p/share/metainfo/$APP_ID.metainfo.xml" \
         "$p/share/icons/hicolor/scalable/apps/$APP_ID.svg" \
         "$p/share/grpo-studio/models/tiny-arith/config.json" \
         "$p/share/grpo-studio/models/tiny-arith/model.safetensors" \
         "$p/share/grpo-studio/models/tiny-arith/tokenizer.json" \
         "$p/share/grpo-studio/presets/demo.yaml"; do
  [ -e "$root/$f" ] || fail "package lacks /$f"
done
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$root/$p/share/applications/$APP_ID.desktop"
fi
if command -v appstreamcli >/dev/null; then
  appstreamcli validate --no-net "$root/$p/share/metainfo/$APP_ID.metainfo.xml" >/dev/null ||
    fail "AppStream metainfo does not validate"
fi

version="$("$root/$p/bin/grpo" --version)"
echo "$version"
grep -q "^grpo [0-9]" <<<"$version" || fail "grpo --version printed '$version'"
# The packaged demo model, read by the packaged binary (resources from the unpacked root).
GRPO_RESOURCES="$root/$p/share/grpo-studio" "$root/$p/bin/grpo" inspect model --json \
  "$root/$p/share/grpo-studio/models/tiny-arith" | grep -q '"model_type":"qwen2"' ||
  fail "grpo inspect model on the packaged demo model"

if [ -x "$root/$p/bin/grpo-studio" ]; then
  studio="$(QT_QPA_PLATFORM=offscreen "$root/$p/bin/grpo-studio" --version)"
  echo "$studio"
  grep -q "[0-9]\+\.[0-9]\+" <<<"$studio" || fail "grpo-studio --version printed '$studio'"
else
  echo "grpo-studio not built: skipped"
fi
echo "check_package: OK"
