#!/usr/bin/env bash
# Configures, builds and installs Passepartout with a given CMAKE_INSTALL_LIBDIR
# (lib64, as Fedora's) into a temporary prefix, then checks that the installed
# executable finds its bundled skills and manifests there with no variable set.
#
# usage: install_with_libdir.sh <cmake> <source-dir> <work-dir> <libdir>
# The build folder (<work-dir>/build) is kept, so a second run only relinks what
# changed; the prefix is temporary. Every step runs under `timeout`;
# $PASSEPARTOUT_TEST_JOBS sets the build's parallel jobs (default 2).
set -euo pipefail

cmake_bin=${1:?usage: $0 <cmake> <source-dir> <work-dir> <libdir>}
source_dir=${2:?usage: $0 <cmake> <source-dir> <work-dir> <libdir>}
work_dir=${3:?usage: $0 <cmake> <source-dir> <work-dir> <libdir>}
libdir=${4:?usage: $0 <cmake> <source-dir> <work-dir> <libdir>}
step_timeout=1200

build=$work_dir/build
scratch=$(mktemp -d "${TMPDIR:-/tmp}/passepartout-install-test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
logged() {
  local log=$1; shift
  timeout "$step_timeout" "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; fail "exit $? from: $*"; }
}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "== configuring with CMAKE_INSTALL_LIBDIR=$libdir in $build"
mkdir -p "$work_dir"
logged "$work_dir/configure.log" "$cmake_bin" -S "$source_dir" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O0 -DCMAKE_C_FLAGS=-O0 \
  -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_INSTALL_LIBDIR="$libdir" \
  -DPASSEPARTOUT_BUILD_TESTS=OFF -DPASSEPARTOUT_JEMALLOC=OFF -DPASSEPARTOUT_WERROR=OFF "${launcher[@]}"

echo "== building (the first run builds everything; later ones only what changed)"
logged "$work_dir/build.log" "$cmake_bin" --build "$build" -j "${PASSEPARTOUT_TEST_JOBS:-2}"

echo "== installing into $prefix"
logged "$work_dir/install.log" "$cmake_bin" --install "$build" --prefix "$prefix"
plugins=$prefix/$libdir/passepartout/plugins
manifests=$prefix/share/passepartout/manifests
compgen -G "$plugins/*.so" >/dev/null || fail "no skill library installed in $plugins"
compgen -G "$manifests/*.yaml" >/dev/null || fail "no manifest installed in $manifests"
[[ ! -e $prefix/lib/passepartout ]] || fail "something was installed under $prefix/lib/passepartout"

# Hermetic: no variable points the executable at the skills, and state goes to scratch.
unset PASSEPARTOUT_PLUGIN_DIR PASSEPARTOUT_MANIFEST_DIR
export HOME=$scratch/home XDG_STATE_HOME=$scratch/state XDG_RUNTIME_DIR=$scratch/run
mkdir -p "$HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"

echo "== passepartout skills check (the installed default plugin folder)"
report=$(timeout 60 "$prefix/bin/passepartout" skills check "$manifests" --json) ||
  fail "skills check exited $?: $report"
grep -q "\"plugin_dir\":\"${plugins//\//\\/}\"\|\"plugin_dir\": *\"$plugins\"" <<<"$report" ||
  fail "skills check did not use $plugins: $report"
grep -q '"ok": *true' <<<"$report" || fail "the bundled skills do not all load: $report"

echo "PASS: an install with libdir $libdir finds its bundled skills in $plugins"
