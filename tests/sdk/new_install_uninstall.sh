#!/usr/bin/env bash
# The third-party path as the README shows it, end to end, against an
# installed Passepartout: `skills new` in an installed layout prints the
# configure, build and install commands, which are run exactly as printed;
# the skill is then loaded by a running daemon, stays across a rescan and a
# restart, and `skills uninstall` takes it and its files away.
#
# usage: new_install_uninstall.sh <cmake> <passepartout-build-dir>
# Offline, bounded (every step under `timeout`, every wait bounded), hermetic
# (HOME, state, socket and the daemon's folders in a temporary folder, TCP on
# port 0), and leaves nothing behind.
set -euo pipefail

cmake_bin=${1:?usage: $0 <cmake> <build-dir>}
build_dir=${2:?usage: $0 <cmake> <build-dir>}
step_timeout=240

work=$(mktemp -d "${TMPDIR:-/tmp}/passepartout-new-install.XXXXXX")
daemon_pid=
cleanup() {
  if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
prefix=$work/prefix
export HOME=$work/home PASSEPARTOUT_STATE_DIR=$work/state PASSEPARTOUT_SOCKET=$work/s.sock
unset XDG_STATE_HOME XDG_RUNTIME_DIR PASSEPARTOUT_PORT PASSEPARTOUT_TEMPLATE_DIR PASSEPARTOUT_MANIFEST_DIR \
  PASSEPARTOUT_PLUGIN_DIR CMAKE_PREFIX_PATH
mkdir -p "$HOME" "$work/manifests" "$work/plugins"

fail() {
  echo "FAIL: $*" >&2
  [[ -f $work/daemon.log ]] && tail -n 30 "$work/daemon.log" >&2
  exit 1
}
run() { timeout "$step_timeout" "$@" || fail "exit $? from: $*"; }

echo "== installing the build into $prefix"
timeout "$step_timeout" "$cmake_bin" --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { tail -n 30 "$work/install.log" >&2; fail "cmake --install"; }
pp=$prefix/bin/passepartout
[[ -x $pp ]] || fail "no $pp installed"

echo "== passepartout skills new e2e-guard"
cd "$work"
run "$pp" skills new e2e-guard >"$work/new.txt"
cat "$work/new.txt"
mapfile -t next < <(sed -n '/^Next:/,$p' "$work/new.txt" | sed -n 's/^  //p')
[[ ${#next[@]} -eq 3 ]] || fail "expected three commands after 'Next:', got ${#next[@]}"
[[ ${next[0]} == "cmake -S e2e-guard -B e2e-guard/build -DCMAKE_PREFIX_PATH=$prefix" ]] || fail "configure: ${next[0]}"
[[ ${next[1]} == "cmake --build e2e-guard/build" ]] || fail "build: ${next[1]}"
[[ ${next[2]} == "passepartout skills install e2e-guard/e2e-guard.yaml" ]] || fail "install: ${next[2]}"

echo "== configure and build, as printed"
run $cmake_bin -S e2e-guard -B e2e-guard/build -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF >"$work/configure.log"
run $cmake_bin --build e2e-guard/build >"$work/build.log"
[[ -f e2e-guard/build/libe2e-guard.so ]] || fail "the build made no libe2e-guard.so"

start_daemon() {
  "$pp" daemon --socket "$PASSEPARTOUT_SOCKET" --state-dir "$PASSEPARTOUT_STATE_DIR" --port 0 --metrics-port off \
    --heartbeat-interval 0 --provider offline \
    --manifests "$work/manifests" --plugins "$work/plugins" >>"$work/daemon.out" 2>>"$work/daemon.log" &
  daemon_pid=$!
  local tries=0
  until "$pp" status >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || fail "the daemon exited"
    tries=$((tries + 1))
    ((tries < 300)) || fail "the daemon did not answer within 30 s"
    sleep 0.1
  done
}
stop_daemon() {
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || fail "the daemon exited with $?"
  daemon_pid=
}
skill_state() {
  "$pp" skills list --json | python3 -c '
import json, sys
states = {s["name"]: s["state"] for s in json.load(sys.stdin)["skills"]}
print(states.get("e2e-guard", "absent"))'
}

echo "== install into the running daemon, as printed"
start_daemon
run "$pp" skills install e2e-guard/e2e-guard.yaml
[[ $(skill_state) == loaded ]] || fail "e2e-guard is not loaded after the install"
[[ $(stat -c %a "$work/plugins/libe2e-guard.so") == 644 ]] || fail "the library's mode is not 0644"
[[ $(stat -c %a "$work/manifests/e2e-guard.yaml") == 644 ]] || fail "the manifest's mode is not 0644"

echo "== a rescan and a restart keep it"
run "$pp" skills rescan >/dev/null
[[ $(skill_state) == loaded ]] || fail "a rescan undid the install"
stop_daemon
start_daemon
[[ $(skill_state) == loaded ]] || fail "e2e-guard is not loaded after a restart"

echo "== uninstall"
run "$pp" skills uninstall e2e-guard
[[ $(skill_state) == absent ]] || fail "e2e-guard is still listed after the uninstall"
[[ -z $(ls -A "$work/manifests") && -z $(ls -A "$work/plugins") ]] || fail "files are left: $(ls -A "$work/manifests" "$work/plugins")"
stop_daemon
echo "PASS: new, configure, build, install, uninstall"
