#!/usr/bin/env bash
# hutchd under a real systemd (issue 18.7): the unit as `cmake --install` puts it, run by systemd
# 252 on cgroup v2 (Debian 12's), in a box of the systemd template, with hutch installed from
# this build and this host's QEMU copied in. The box's hutchd runs a box of its own (QEMU under
# TCG inside a TCG guest: its first boot takes a minute or two). Proven:
#   1. `systemctl start hutchd`: the unit is active, and the boxes' cgroups are in /hutch, not
#      below the unit's cgroup (whose subtree_control stays empty);
#   2. `systemctl restart hutchd` while the inner box runs: the unit is active again (systemd 252
#      failed this with 219/CGROUP when the boxes were below the unit), the box's QEMU is the
#      same process, and the new hutchd adopted it (exec answers);
#   3. `systemctl stop hutchd`: the QEMU still runs; `start`: adopted again; journald has the log;
#      one hutch-egress runs (each hutchd stopped its predecessor's); a daemon-reload in between
#      leaves the box's cgroup and its controllers alone;
#   4. `hutch rm` removes the box and its cgroup.
# Usage: tests/install/systemd_test.sh BUILD_DIR   (root; HUTCH_TEST_IMAGE is the base template,
# HUTCH_TEST_SYSTEMD_IMAGE the systemd one). ~5 min on a 2-core TCG host: not in CI; run by hand,
# results in docs/reliability.md.
set -euo pipefail

fail() {
  echo "systemd_test: FAIL: $*" >&2
  if [ -n "${daemon:-}" ] && [ -S "$tmp/hutchd.sock" ]; then
    hutch exec -u root sd -- sh -c 'systemctl status hutchd --no-pager; journalctl -u hutchd --no-pager | tail -n 40' >&2 || true
  fi
  exit 1
}
step() { echo "systemd_test: $*" >&2; }

build=$(cd "${1:?usage: systemd_test.sh BUILD_DIR}" && pwd)
: "${HUTCH_TEST_IMAGE:?the base template (scripts/test.sh builds it)}"
: "${HUTCH_TEST_SYSTEMD_IMAGE:?the systemd template (scripts/build-image.sh --recipe images/systemd)}"
tmp=$(mktemp -d /tmp/hutch-systemd-XXXXXX)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then
    hutch rm -f sd >/dev/null 2>&1 || true
    kill -TERM "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
  pkill -9 -f "$tmp/" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
hutch() { "$build/src/cli/hutch" --socket "$tmp/hutchd.sock" "$@"; }
# A script run as root in the box.
in_box() { hutch exec -u root sd -- sh -ec "$1"; }

# The outer hutchd, with the two templates.
mkdir -p "$tmp/state/templates"
ln -s "$HUTCH_TEST_IMAGE" "$tmp/state/templates/base"
ln -s "$HUTCH_TEST_SYSTEMD_IMAGE" "$tmp/state/templates/systemd"
"$build/src/daemon/hutchd" --socket "$tmp/hutchd.sock" --state-dir "$tmp/state" --pool-size 0 \
  --idle-pause 0 >"$tmp/hutchd.log" 2>&1 &
daemon=$!
for _ in $(seq 300); do
  hutch ls >/dev/null 2>&1 && break
  sleep 0.1
done
hutch ls >/dev/null || fail "the outer hutchd did not answer: $(tail -n 20 "$tmp/hutchd.log")"
step "a box of the systemd template"
hutch run --name sd --template systemd --memory 4G --cpus 2 --disk 8G >/dev/null ||
  fail "hutch run --template systemd failed"
[ "$(in_box 'systemctl is-system-running --wait || true')" = running ] ||
  fail "systemd in the box is not running: $(in_box 'systemctl --failed --no-pager')"

# What goes into the box: hutch as installed with prefix /usr, this host's QEMU (binary, TCG
# module, firmware, qemu-img), nft, the libraries all of them need, and the base template.
step "installing hutch and QEMU in the box"
root=$tmp/root
DESTDIR=$root cmake --install "$build" --prefix /usr >"$tmp/install.log" ||
  fail "cmake --install failed: $(tail -n 5 "$tmp/install.log")"
extra=(/usr/bin/qemu-system-x86_64 /usr/bin/qemu-img /usr/sbin/nft
  /usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so /usr/share/qemu /usr/share/seabios)
libs=$( (find "$root/usr" -type f -perm -u+x; find "$root/usr" -name '*.so'; printf '%s\n' "${extra[@]}") |
  while read -r f; do [ -f "$f" ] && ldd "$f" 2>/dev/null || true; done |
  awk '/=> \// {print $3}' | sort -u)
tar -C "$root" -cf "$tmp/hutch.tar" .
# shellcheck disable=SC2086
tar -chf "$tmp/host.tar" "${extra[@]}" $libs 2>/dev/null
mkdir -p "$tmp/base"
cp "$HUTCH_TEST_IMAGE"/{vmlinux,initrd.img,manifest.json} "$tmp/base/"
cp --sparse=always "$HUTCH_TEST_IMAGE/rootfs.img" "$tmp/base/"
tar -C "$tmp/base" -cSf "$tmp/base.tar" .
for f in hutch.tar host.tar base.tar; do
  hutch cp "$tmp/$f" "sd:/tmp/$f" || fail "hutch cp $f failed"
done
# The box's own libraries stay (--skip-old-files): both are Debian 12's.
in_box 'tar -xf /tmp/hutch.tar -C / && tar -xf /tmp/host.tar -C / --skip-old-files &&
  mkdir -p /var/lib/hutch/templates/base && tar -xSf /tmp/base.tar -C /var/lib/hutch/templates/base &&
  rm /tmp/*.tar && qemu-system-x86_64 --version >/dev/null && hutchd --help >/dev/null' ||
  fail "hutch or QEMU does not run in the box"

# The unit as installed; a drop-in adds what a minute-long nested boot needs, and keeps the
# unit's own arguments (--cgroup-parent).
unit=$(in_box 'cat /usr/lib/systemd/system/hutchd.service')
exec_start=$(sed -n 's/^ExecStart=//p' <<<"$unit")
grep -q -- '--cgroup-parent /hutch' <<<"$exec_start" || fail "the unit's ExecStart is '$exec_start'"
in_box "mkdir -p /etc/systemd/system/hutchd.service.d && printf '[Service]\nExecStart=\nExecStart=%s --boot-timeout 900 --pool-size 0 --idle-pause 0\n' '$exec_start' >/etc/systemd/system/hutchd.service.d/test.conf && systemctl daemon-reload"

step "1. systemctl start hutchd"
in_box 'systemctl start hutchd' || fail "systemctl start hutchd failed"
inner() { in_box "hutch $*"; }
inner_answers() {
  for _ in $(seq 120); do
    inner ls >/dev/null 2>&1 && return 0
    sleep 1
  done
  fail "hutchd in the box does not answer on /run/hutch/hutchd.sock"
}
# The inner box's QEMU pid, from hutchd; then whether hutchd has it and it answers.
inner_pid() { inner inspect inner | sed -n 's/^ *"pid": *\([0-9]*\),*$/\1/p' | head -1; }
adopted() {
  inner_answers
  [ "$(inner exec inner -- hostname)" = inner ] || fail "hutchd did not adopt the box $1"
  [ "$(inner_pid)" = "$pid" ] || fail "the box has another QEMU $1"
}
inner_answers
unit_cgroup=/sys/fs/cgroup/system.slice/hutchd.service
step "the inner box (a cold boot under nested TCG, then its template snapshot)"
inner run --name inner >/dev/null || fail "hutch run in the box failed"
pid=$(inner_pid)
id=$(inner inspect inner | sed -n 's/^ *"id": *"\([0-9a-f]*\)",*$/\1/p' | head -1)
[ -n "$pid" ] && [ -n "$id" ] || fail "no pid or id for the inner box"
[ "$(in_box "cat /proc/$pid/cgroup")" = "0::/hutch/$id" ] ||
  fail "the inner box's QEMU is in $(in_box "cat /proc/$pid/cgroup"), not /hutch/$id"
[ -z "$(in_box "cat $unit_cgroup/cgroup.subtree_control")" ] ||
  fail "controllers are enabled below the unit's cgroup: $(in_box "cat $unit_cgroup/cgroup.subtree_control")"

# A daemon-reload re-applies every unit's cgroup settings: /hutch is not a unit's and stays.
in_box 'systemctl daemon-reload'
[ "$(in_box "cat /proc/$pid/cgroup")" = "0::/hutch/$id" ] || fail "daemon-reload moved the QEMU"
grep -qw memory <<<"$(in_box 'cat /sys/fs/cgroup/hutch/cgroup.subtree_control')" ||
  fail "daemon-reload took the memory controller from /hutch"

step "2. systemctl restart hutchd while the box runs"
in_box 'systemctl restart hutchd' || fail "systemctl restart hutchd failed"
[ "$(in_box 'systemctl is-active hutchd || true')" = active ] || fail "the unit is not active after a restart"
in_box "kill -0 $pid" || fail "the inner box's QEMU (pid $pid) did not outlive the restart"
adopted "after a restart of the unit"

step "3. systemctl stop, then start"
in_box 'systemctl stop hutchd' || fail "systemctl stop hutchd failed"
in_box "kill -0 $pid" || fail "the inner box's QEMU did not outlive a stop of the unit"
in_box 'systemctl start hutchd' || fail "systemctl start hutchd failed after a stop"
adopted "after a stop and a start of the unit"
[ "$(in_box 'journalctl -u hutchd --no-pager -o cat | grep -c "adopted the running VM" || true')" -ge 2 ] ||
  fail "the journal does not have both adoptions"

# Each hutchd stopped the hutch-egress of the one before it.
[ "$(in_box 'pgrep -cx hutch-egress || true')" = 1 ] ||
  fail "hutch-egress processes: $(in_box 'pgrep -ax hutch-egress || true')"

step "4. hutch rm"
inner rm -f inner >/dev/null || fail "hutch rm in the box failed"
for _ in $(seq 100); do
  [ -z "$(in_box 'find /sys/fs/cgroup/hutch -mindepth 1 -maxdepth 1 -type d')" ] && break
  sleep 0.2
done
[ -z "$(in_box 'find /sys/fs/cgroup/hutch -mindepth 1 -maxdepth 1 -type d')" ] ||
  fail "rm left a cgroup in /hutch"
in_box "! kill -0 $pid 2>/dev/null" || fail "rm left the inner box's QEMU"
echo "systemd_test: ok"
