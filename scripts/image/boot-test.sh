#!/usr/bin/env bash
# Boots a guest image the way the VMM backend will (QEMU microvm, TCG, PVH vmlinux, qcow2 overlay
# over rootfs.img, agent port on a unix socket, console to a file) and measures QEMU start -> a
# line on the console. Every QEMU runs under `timeout` and is killed before the script returns.
#
#   scripts/image/boot-test.sh [--runs N] [--expect TEXT] [--append "EXTRA ARGS"] [--timeout S]
#                              [--qemu "EXTRA QEMU ARGS"] [--channel] [--keep] IMAGE_DIR
#
#   --expect TEXT   console text that means "booted" (default HUTCH-STANDIN-OK)
#   --append ARGS   extra kernel command line (e.g. hutch.standin=reboot, hutch.initdebug=1)
#   --qemu ARGS     extra QEMU arguments, split on spaces (e.g. a virtio-rng or virtio-net device)
#   --channel       also read the agent port from the host side and require the expected text
#   --keep          keep each run's directory (console.log, overlay) and print where it is
# Prints one line per run and the median; exits non-zero if any run failed.
set -euo pipefail

runs=1 expect=HUTCH-STANDIN-OK append="" tmo=60 channel="" keep="" qemu_extra=""
while [ $# -gt 1 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --append) append=$2; shift 2 ;;
    --qemu) qemu_extra=$2; shift 2 ;;
    --timeout) tmo=$2; shift 2 ;;
    --channel) channel=1; shift ;;
    --keep) keep=1; shift ;;
    *) echo "boot-test: unknown argument $1" >&2; exit 2 ;;
  esac
done
img=${1:?usage: boot-test.sh [options] IMAGE_DIR}
img=$(cd "$img" && pwd)
for f in vmlinux initrd.img rootfs.img; do
  [ -f "$img/$f" ] || { echo "boot-test: $img/$f missing" >&2; exit 2; }
done

# Host TSC frequency in kHz, read at run time (never hard-coded).
host_tsc_khz() {
  local mhz
  mhz=$(dmesg 2>/dev/null | sed -n 's/.*tsc: Refined TSC clocksource calibration: \([0-9.]*\) MHz.*/\1/p' | tail -n1)
  [ -n "$mhz" ] || mhz=$(dmesg 2>/dev/null | sed -n 's/.*tsc: Detected \([0-9.]*\) MHz.*/\1/p' | tail -n1)
  [ -n "$mhz" ] || mhz=$(sed -n 's/^cpu MHz[[:space:]]*: *\([0-9.]*\).*/\1/p' /proc/cpuinfo | head -n1)
  [ -n "$mhz" ] || return 1
  awk -v m="$mhz" 'BEGIN { printf "%d\n", m * 1000 + 0.5 }'
}
tsc=$(host_tsc_khz) || { echo "boot-test: cannot read the host TSC frequency" >&2; exit 2; }

results=()
failed=0
qpid="" qemu_pidfile=""
# stop_qemu: ends the QEMU of the current run. $qpid is `timeout`, which passes SIGTERM on to
# QEMU; SIGKILL would orphan QEMU, so that goes to QEMU's own pid (from -pidfile).
stop_qemu() {
  [ -n "$qpid" ] || return 0
  if kill -0 "$qpid" 2>/dev/null; then
    kill -TERM "$qpid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.02; done
  fi
  if [ -s "$qemu_pidfile" ]; then
    local qp
    qp=$(cat "$qemu_pidfile")
    if [ -n "$qp" ] && kill -0 "$qp" 2>/dev/null && grep -q qemu "/proc/$qp/cmdline" 2>/dev/null; then
      kill -KILL "$qp" 2>/dev/null || true
    fi
  fi
  wait "$qpid" 2>/dev/null || true
  qpid=""
}
trap stop_qemu EXIT

for run in $(seq 1 "$runs"); do
  dir=$(mktemp -d /tmp/hutch-boot-XXXXXX)
  qemu-img create -q -f qcow2 -b "$img/rootfs.img" -F raw "$dir/overlay.qcow2"
  cmdline="console=ttyS0 root=/dev/vda rw quiet tsc=reliable tsc_early_khz=$tsc hutch.hostname=boot-test-$run${append:+ $append}"
  : >"$dir/console.log"
  t0=$(date +%s%N)
  qemu_pidfile="$dir/qemu.pid"
  timeout "$tmo" qemu-system-x86_64 -M microvm -accel tcg -nodefaults -no-user-config \
    -nographic -m 512 -smp 1 \
    -kernel "$img/vmlinux" -initrd "$img/initrd.img" -append "$cmdline" \
    -drive id=root,file="$dir/overlay.qcow2",format=qcow2,if=none -device virtio-blk-device,drive=root \
    -device virtio-serial-device \
    -chardev socket,id=agent,path="$dir/agent.sock",server=on,wait=off \
    -device virtserialport,chardev=agent,name=hutch.agent \
    -serial file:"$dir/console.log" -no-reboot -pidfile "$qemu_pidfile" $qemu_extra >"$dir/qemu.out" 2>&1 &
  qpid=$!
  if [ -n "$channel" ]; then
    for _ in $(seq 200); do [ -S "$dir/agent.sock" ] && break; sleep 0.01; done
    python3 - "$dir/agent.sock" "$tmo" >"$dir/channel.out" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1]); s.settimeout(float(sys.argv[2]))
data = b""
try:
    while b"\n" not in data:
        chunk = s.recv(4096)
        if not chunk: break
        data += chunk
except OSError as e:
    print("channel error:", e)
sys.stdout.write(data.decode(errors="replace"))
PY
  fi
  seen=""
  while kill -0 "$qpid" 2>/dev/null; do
    if grep -q -- "$expect" "$dir/console.log"; then
      seen=$(date +%s%N)
      break
    fi
    sleep 0.01
  done
  # Wait for the guest to end the VM by itself (poweroff / reboot under -no-reboot).
  t_end=""
  for _ in $(seq 1000); do
    kill -0 "$qpid" 2>/dev/null || { t_end=$(date +%s%N); break; }
    sleep 0.01
  done
  status=running
  if [ -n "$t_end" ]; then
    wait "$qpid" && rc=0 || rc=$?
    status="qemu exited rc=$rc at $(((t_end - t0) / 1000000)) ms"
    [ "$rc" = 124 ] && status="killed by timeout ${tmo}s"
    qpid=""
  else
    stop_qemu
    status="qemu still running 10 s after the line: killed"
  fi
  if [ -n "$seen" ]; then
    ms=$(((seen - t0) / 1000000))
    results+=("$ms")
    line=$(grep -m1 -- "$expect" "$dir/console.log" | tr -d '\r')
    echo "run $run: '$line' after $ms ms; $status"
  else
    failed=1
    echo "run $run: FAILED, '$expect' never appeared; $status. Console:"
    tr -d '\r' <"$dir/console.log" | tail -n 30 | sed 's/^/  | /'
  fi
  if [ -n "$channel" ]; then
    wait 2>/dev/null || true
    if grep -q -- "$expect" "$dir/channel.out" 2>/dev/null; then
      echo "run $run: agent port (host side of hutch.agent) received: $(head -n1 "$dir/channel.out")"
    else
      failed=1
      echo "run $run: FAILED, nothing from the agent port: $(cat "$dir/channel.out" 2>/dev/null)"
    fi
  fi
  if [ -n "$keep" ]; then echo "run $run: kept $dir"; else rm -rf "$dir"; fi
done

if [ ${#results[@]} -gt 0 ]; then
  median=$(printf '%s\n' "${results[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  echo "median QEMU start -> '$expect': $median ms over ${#results[@]} runs (host TSC ${tsc} kHz)"
fi
exit "$failed"
