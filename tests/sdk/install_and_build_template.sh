#!/usr/bin/env bash
# Installs the SDK component of a configured build into a temporary prefix, copies
# the installed template out of it, and builds it out of tree with g++ and with
# clang++ exactly as its README says; then checks the library exports one function.
#
# usage: install_and_build_template.sh <cmake> <passepartout-build-dir>
# Offline, bounded (every step under `timeout`), and leaves nothing behind.
set -euo pipefail

cmake_bin=${1:?usage: $0 <cmake> <build-dir>}
build_dir=${2:?usage: $0 <cmake> <build-dir>}
step_timeout=240

work=$(mktemp -d "${TMPDIR:-/tmp}/passepartout-sdk-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
run() { timeout "$step_timeout" "$@" || fail "exit $? from: $*"; }

find_tool() {
  local tool
  for tool in "$@"; do
    if command -v "$tool" >/dev/null 2>&1; then command -v "$tool"; return 0; fi
  done
  return 1
}
gxx=$(find_tool g++) || fail "g++ not found"
clangxx=$(find_tool clang++-14 clang++) || fail "clang++-14 (or clang++) not found"
clang_c=$(find_tool clang-14 clang) || fail "clang-14 (or clang) not found"

echo "== installing the sdk component into $prefix"
timeout "$step_timeout" "$cmake_bin" --install "$build_dir" --component sdk --prefix "$prefix" \
  >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install --component sdk"; }
for file in include/passepartout/abi.h include/passepartout/value.hpp include/passepartout/skill.hpp; do
  [[ -f $prefix/$file ]] || fail "the install has no $file"
done
config=$(find "$prefix" -name PassepartoutConfig.cmake -print -quit)
[[ -n $config ]] || fail "the install has no PassepartoutConfig.cmake"
[[ -f $(dirname "$config")/PassepartoutAddSkill.cmake ]] || fail "the install has no PassepartoutAddSkill.cmake"
template=$prefix/share/passepartout/template
[[ -f $template/CMakeLists.txt ]] || fail "the install has no template at $template"
if find "$prefix" -path '*/bin/*' -o -name '*.a' | grep -q .; then
  fail "the sdk component installed more than the SDK: $(find "$prefix" -path '*/bin/*' -o -name '*.a')"
fi

echo "== each installed header alone, with $clangxx and $gxx"
for header in abi.h value.hpp skill.hpp; do
  for cxx in "$gxx" "$clangxx"; do
    echo "#include <passepartout/$header>" |
      run "$cxx" -std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" -x c++ -
  done
done
echo "#include <passepartout/abi.h>" |
  run "$clang_c" -std=c99 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" -x c -

# Builds the copied template with one compiler and checks what it exports.
build_template() {
  local label=$1 compiler=$2
  local source=$work/$label/my-skill build=$work/$label/build
  mkdir -p "$work/$label"
  cp -r "$template" "$source"
  echo "== configuring the template with $compiler"
  timeout "$step_timeout" "$cmake_bin" -S "$source" -B "$build" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_COMPILER="$compiler" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; fail "configure with $compiler"; }
  grep -q "^Passepartout_DIR:PATH=$prefix/" "$build/CMakeCache.txt" ||
    fail "$label: find_package(Passepartout) did not use the installed package: $(grep '^Passepartout_DIR' "$build/CMakeCache.txt")"

  echo "== building the template with $compiler"
  run "$cmake_bin" --build "$build" -j 2

  local library=$build/libmy-skill.so
  [[ -f $library ]] || fail "$label: $library was not built"

  # Dynamic symbols the library defines: "<address> <type> <name>".
  local symbols functions unique others
  symbols=$(nm -D --defined-only "$library")
  functions=$(awk '$2 ~ /^[TtIi]$/ { print $3 }' <<<"$symbols" | sort)
  unique=$(awk '$2 == "u" { print $3 }' <<<"$symbols")
  others=$(awk '$2 !~ /^[TtIiu]$/ { print $2, $3 }' <<<"$symbols")
  [[ $functions == passepartout_skill_entry ]] ||
    fail "$label: exported functions should be just passepartout_skill_entry, found: $(echo $functions)"
  [[ -z $unique ]] ||
    fail "$label: STB_GNU_UNIQUE symbols pin the library in memory: $(echo $unique)"
  if [[ -n $others ]]; then
    echo "$label: libmy-skill.so exports passepartout_skill_entry; also (weak/data, from the C++ runtime): $(echo $others)"
  else
    echo "$label: libmy-skill.so exports passepartout_skill_entry and nothing else"
  fi
}

build_template gcc "$gxx"
build_template clang "$clangxx"
echo "PASS: the template builds against the installed SDK with g++ and clang++"
