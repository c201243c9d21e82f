#!/usr/bin/env bash
# The installed layout (docs/install.md), proven on this host:
#   1. `cmake --install` into a temporary prefix puts every binary, helper, recipe, the image
#      builder and the systemd unit where hutchd looks for them;
#   2. that hutchd's defaults name no path of the build tree or the checkout;
#   3. that hutchd and hutch run a box (the base template: $HUTCH_TEST_IMAGE), jailed with the
#      installed hutch-jail; a SIGKILLed hutchd's successor adopts the box (what KillMode=process
#      in the unit relies on: QEMU outlives hutchd);
#      two hutchd given no --uid-base (two state directories) take ranges of their own; a third
#      whose state directory kept a range a running one holds is refused (exit 75);
#   4. the unit passes `systemd-analyze verify`;
#   5. `cpack -G DEB` makes a package of the same files, whose unit starts /usr/sbin/hutchd.
# Usage: tests/install/install_test.sh BUILD_DIR   (root; ctest runs it as install.layout)
set -euo pipefail

fail() {
  echo "install_test: FAIL: $*" >&2
  [ -f "${tmp:-/nonexistent}/hutchd.log" ] && tail -n 40 "$tmp/hutchd.log" >&2
  exit 1
}

build=$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d /tmp/hutch-install-XXXXXX)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -9 "$daemon" 2>/dev/null || true; fi
  # Whatever QEMU a failed run left (its command line names this directory).
  pkill -9 -f "$tmp/" 2>/dev/null || true
  # The --cgroup-parent run's cgroups, in every hierarchy (empty once the QEMUs are gone).
  if [ -n "${parent:-}" ]; then
    find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -depth -type d -path "*${parent}*" \
      -exec rmdir {} \; 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1. The files.
cmake --install "$build" --prefix "$tmp/usr" >"$tmp/install.log" || fail "cmake --install failed: $(tail -n 5 "$tmp/install.log")"
prefix=$tmp/usr
for f in bin/hutch sbin/hutchd libexec/hutch/hutch-agent libexec/hutch/hutch-jail \
  libexec/hutch/hutch-egress libexec/hutch/hutch-ram-preload.so share/hutch/scripts/build-image.sh \
  share/hutch/scripts/image/init share/hutch/images/base/packages \
  share/hutch/images/systemd/files/etc/systemd/system/hutch-agent.service \
  lib/systemd/system/hutchd.service; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
[ -x "$prefix/share/hutch/scripts/build-image.sh" ] || fail "build-image.sh is not executable"

# 2. Its defaults are the installed files.
help=$("$prefix/sbin/hutchd" --help)
for want in "--jail TEXT=$prefix/libexec/hutch/hutch-jail" \
  "--egress TEXT=$prefix/libexec/hutch/hutch-egress" \
  "--agent TEXT=$prefix/libexec/hutch/hutch-agent" \
  "--recipes TEXT=$prefix/share/hutch/images" \
  "--builder TEXT=$prefix/share/hutch/scripts/build-image.sh"; do
  grep -qF -- "$want" <<<"$help" || fail "hutchd --help lacks '$want'"
done
if grep -F -e "$build" -e "$src/" <<<"$help"; then
  fail "an installed hutchd's defaults name the build tree or the checkout (above)"
fi

# 3. A box, from the installed binaries only.
if [ -n "${HUTCH_TEST_IMAGE:-}" ] && [ -f "$HUTCH_TEST_IMAGE/rootfs.img" ]; then
  state=$tmp/state
  mkdir -p "$state/templates"
  ln -s "$HUTCH_TEST_IMAGE" "$state/templates/base"
  uid_base=$((0x5C010000 + ($$ % 512) * 65536))
  start_daemon() {
    "$prefix/sbin/hutchd" --socket "$tmp/hutchd.sock" --state-dir "$state" --uid-base "$uid_base" \
      --pool-size 0 --image-cache "$tmp/cache" "$@" >>"$tmp/hutchd.log" 2>&1 &
    daemon=$!
    for _ in $(seq 300); do
      "$prefix/bin/hutch" --socket "$tmp/hutchd.sock" ls >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    fail "the installed hutchd did not answer within 30 s"
  }
  hutch() { "$prefix/bin/hutch" --socket "$tmp/hutchd.sock" "$@"; }
  start_daemon
  grep -qF "jail: $prefix/libexec/hutch/hutch-jail" "$tmp/hutchd.log" ||
    fail "hutchd does not jail QEMU with the installed hutch-jail"
  hutch run --name installed >/dev/null || fail "hutch run failed"
  out=$(hutch exec installed -- cat /proc/version) || fail "hutch exec failed"
  grep -q '^Linux version' <<<"$out" || fail "the box answered '$out'"
  # The box outlives its hutchd; the next one adopts it.
  kill -9 "$daemon"
  wait "$daemon" 2>/dev/null || true
  start_daemon
  [ "$(hutch exec installed -- hostname)" = installed ] || fail "the restarted hutchd did not adopt the box"

  # The unit's --cgroup-parent (boxes' cgroups outside hutchd's): a hutchd given one adopts the
  # box an earlier hutchd put below itself (an upgrade), puts new boxes in the parent, adopts
  # those after a SIGKILL, and removes both kinds of cgroup with their boxes.
  parent=/hutch-install-$$
  # The memory controller's hierarchy: its v1 mount, else the v2 one.
  mounts() { awk '{ for (i = 7; $i != "-"; i++) {}; print $(i + 1), $(i + 3), $5 }' /proc/self/mountinfo; }
  memory_cgroups=$(mounts | awk '$1 == "cgroup" && $2 ~ /(^|,)memory(,|$)/ {print $3; exit}')
  [ -n "$memory_cgroups" ] || memory_cgroups=$(mounts | awk '$1 == "cgroup2" {print $3; exit}')
  owner() { # the cgroup (below the memory hierarchy) that holds box $1's QEMU
    local pid
    pid=$(hutch inspect "$1" | sed -n 's/^ *"pid": *\([0-9]*\),*$/\1/p' | head -1)
    [ -n "$pid" ] && [ "$pid" != 0 ] || return 1
    awk -F: '$2 ~ /(^|,)memory(,|$)/ {v1 = $3} $1 == "0" {v2 = $3}
             END {print (v1 != "" ? v1 : v2)}' "/proc/$pid/cgroup"
  }
  legacy_cgroup=$(owner installed) || fail "no QEMU found for box installed"
  kill -9 "$daemon"
  wait "$daemon" 2>/dev/null || true
  start_daemon --cgroup-parent "$parent"
  [ "$(hutch exec installed -- hostname)" = installed ] ||
    fail "a hutchd with --cgroup-parent did not adopt the box an earlier one put below itself"
  hutch run --name parented >/dev/null || fail "hutch run with --cgroup-parent failed"
  [[ "$(owner parented)" == "$parent/"* ]] || fail "box parented's QEMU is in $(owner parented), not below $parent"
  kill -9 "$daemon"
  wait "$daemon" 2>/dev/null || true
  start_daemon --cgroup-parent "$parent"
  [ "$(hutch exec parented -- hostname)" = parented ] ||
    fail "a hutchd with --cgroup-parent did not adopt its own box after a SIGKILL"
  hutch rm -f installed parented >/dev/null || fail "hutch rm failed"
  boxes_in_parent() { find "$memory_cgroups$parent" -mindepth 1 -maxdepth 1 -type d -printf '%f '; }
  # rm answers before its cleanup ends (QEMU's exit, then its cgroup).
  for _ in $(seq 100); do
    if [ ! -e "$memory_cgroups$legacy_cgroup" ] && [ -z "$(boxes_in_parent)" ]; then break; fi
    sleep 0.1
  done
  [ ! -e "$memory_cgroups$legacy_cgroup" ] || fail "rm left the box's cgroup $legacy_cgroup"
  [ -z "$(boxes_in_parent)" ] || fail "rm left cgroups in $parent: $(boxes_in_parent)"
  kill -TERM "$daemon"
  wait "$daemon" 2>/dev/null || true
  daemon=""

  # Two hutchd on one host, neither given --uid-base: each state directory takes a range of its
  # own (kept in it), so their boxes' uids and network namespaces differ; a third hutchd on a
  # running one's range is refused, saying why.
  bases=()
  pids=()
  for name in one two; do
    mkdir -p "$tmp/$name/templates"
    ln -s "$HUTCH_TEST_IMAGE" "$tmp/$name/templates/base"
    "$prefix/sbin/hutchd" --socket "$tmp/$name.sock" --state-dir "$tmp/$name" --pool-size 0 \
      --image-cache "$tmp/cache" >>"$tmp/hutchd.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 300); do
      "$prefix/bin/hutch" --socket "$tmp/$name.sock" ls >/dev/null 2>&1 && break
      sleep 0.1
    done
    "$prefix/bin/hutch" --socket "$tmp/$name.sock" run --name "box-$name" >/dev/null ||
      fail "hutchd $name could not run a box"
    bases+=("$(cat "$tmp/$name/uid-base")")
  done
  [ "${bases[0]}" != "${bases[1]}" ] || fail "two state directories took the same uid range ${bases[0]}"
  for base in "${bases[@]}"; do
    ip netns list | grep -q "^hutch-$(printf '%x' "$base")-" ||
      fail "no network namespace named after the range $base"
  done
  # A state directory whose range (kept from its first start) another hutchd now holds.
  mkdir -p "$tmp/three"
  echo "${bases[0]}" >"$tmp/three/uid-base"
  if "$prefix/sbin/hutchd" --socket "$tmp/three.sock" --state-dir "$tmp/three" \
    >"$tmp/three.log" 2>&1; then
    fail "a hutchd on a running hutchd's uid range started"
  else
    code=$?
  fi
  [ "$code" = 75 ] || fail "a hutchd on a taken range exited $code, not 75: $(cat "$tmp/three.log")"
  grep -q "another hutchd" "$tmp/three.log" || fail "the refusal does not say why: $(cat "$tmp/three.log")"
  for i in 0 1; do
    name=$([ "$i" = 0 ] && echo one || echo two)
    "$prefix/bin/hutch" --socket "$tmp/$name.sock" rm -f "box-$name" >/dev/null
    kill -TERM "${pids[$i]}"
    wait "${pids[$i]}" 2>/dev/null || true
  done
else
  echo "install_test: HUTCH_TEST_IMAGE is not set: no box run from the installed binaries" >&2
fi

# 4. The unit.
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$prefix/lib/systemd/system/hutchd.service" ||
    fail "systemd-analyze verify found problems in hutchd.service"
fi

# 5. The Debian package.
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  (cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) ||
    fail "cpack -G DEB failed: $(tail -n 5 "$tmp/cpack.log")"
  deb=$(ls "$tmp"/pkg/hutch_*.deb)
  contents=$(dpkg-deb --contents "$deb")
  for f in ./usr/bin/hutch ./usr/sbin/hutchd ./usr/libexec/hutch/hutch-jail \
    ./usr/libexec/hutch/hutch-agent ./usr/share/hutch/scripts/build-image.sh \
    ./usr/lib/systemd/system/hutchd.service; do
    grep -qF " $f" <<<"$contents" || fail "the package lacks $f"
  done
  dpkg-deb --field "$deb" Depends | grep -q qemu-system-x86 || fail "the package does not depend on QEMU"
  unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/hutchd.service)
  grep -qx 'ExecStart=/usr/sbin/hutchd --cgroup-parent /hutch' <<<"$unit" ||
    fail "the packaged unit does not start /usr/sbin/hutchd with its boxes' cgroups outside the unit's"
  grep -qx 'KillMode=process' <<<"$unit" || fail "the packaged unit would kill the boxes' QEMUs on restart"
fi
echo "install_test: ok"
