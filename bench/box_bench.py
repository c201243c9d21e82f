#!/usr/bin/env python3
"""Box benchmarks: cold run to first exec answer, exec round trip, exec stdout/stdin throughput,
stop -> start -> first exec, and the host RSS of one idle box's QEMU. Starts its own hutchd on a temp socket and state dir.

Usage: bench/box_bench.py --image DIR [--build build] [--runs 5] [--execs 50] [--mib 100]
Prints one JSON object; docs/benchmarks.md records the results with this command.
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--image", required=True, help="built guest image directory")
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--execs", type=int, default=50)
    p.add_argument("--mib", type=int, default=100)
    a = p.parse_args()

    hutch = os.path.abspath(os.path.join(a.build, "src/cli/hutch"))
    hutchd = os.path.abspath(os.path.join(a.build, "src/daemon/hutchd"))
    tmp = tempfile.mkdtemp(prefix="hutch-bench-")
    state = os.path.join(tmp, "state")
    os.makedirs(os.path.join(state, "templates"))
    os.symlink(os.path.abspath(a.image), os.path.join(state, "templates", "base"))
    sock = os.path.join(tmp, "hutchd.sock")
    log = open(os.path.join(tmp, "hutchd.log"), "w")
    daemon = subprocess.Popen([hutchd, "--socket", sock, "--state-dir", state],
                              stdout=log, stderr=log)

    def cli(*args, **kw):
        return subprocess.run([hutch, "--socket", sock, *args], check=True,
                              capture_output=True, **kw)

    try:
        for _ in range(100):
            if subprocess.run([hutch, "--socket", sock, "ls"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        info = json.loads(cli("--json", "doctor").stdout)

        cold = []
        for i in range(a.runs):
            t0 = time.monotonic()
            cli("run", "--name", f"cold{i}", "--", "true")
            cold.append(time.monotonic() - t0)
            cli("rm", "-f", f"cold{i}")

        cli("run", "--name", "bench")
        rtt = []
        for _ in range(a.execs):
            t0 = time.monotonic()
            cli("exec", "bench", "--", "true")
            rtt.append(time.monotonic() - t0)

        size = a.mib * 1024 * 1024
        cli("exec", "bench", "--", "sh", "-c", f"head -c {size} /dev/zero > /tmp/blob")
        t0 = time.monotonic()
        with open(os.devnull, "wb") as null:
            subprocess.run([hutch, "--socket", sock, "exec", "bench", "--", "cat", "/tmp/blob"],
                           check=True, stdout=null)
        throughput = a.mib / (time.monotonic() - t0)
        stdin_blob = os.path.join(tmp, "blob")
        with open(stdin_blob, "wb") as f:
            f.truncate(size)
        t0 = time.monotonic()
        with open(stdin_blob, "rb") as src:
            subprocess.run([hutch, "--socket", sock, "exec", "-i", "bench", "--", "sh", "-c",
                            "cat > /dev/null"], check=True, stdin=src)
        stdin_throughput = a.mib / (time.monotonic() - t0)
        os.unlink(stdin_blob)
        cli("exec", "bench", "--", "rm", "/tmp/blob")

        restart = []
        for _ in range(3):
            cli("stop", "bench")
            t0 = time.monotonic()
            cli("start", "bench")
            cli("exec", "bench", "--", "true")
            restart.append(time.monotonic() - t0)
        cli("rm", "-f", "bench")

        # A fresh box left idle: what one more sleeping box costs the host.
        cli("run", "--name", "idle")
        time.sleep(10)
        pid = json.loads(cli("inspect", "idle").stdout)[0]["pid"]
        rss_kib = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kib = int(line.split()[1])
        cli("rm", "-f", "idle")

        print(json.dumps({
            "accel": info["accel"]["name"],
            "cold_run_to_first_exec_s": {"median": round(statistics.median(cold), 3),
                                         "min": round(min(cold), 3), "max": round(max(cold), 3),
                                         "n": len(cold)},
            "exec_true_round_trip_ms": {"median": round(statistics.median(rtt) * 1000, 1),
                                        "p90": round(sorted(rtt)[int(len(rtt) * 0.9) - 1] * 1000, 1),
                                        "n": len(rtt)},
            "stopped_start_to_first_exec_s": {"median": round(statistics.median(restart), 3),
                                              "n": len(restart)},
            "exec_output_throughput_mib_s": round(throughput, 1),
            "exec_stdin_throughput_mib_s": round(stdin_throughput, 1),
            "idle_box_qemu_rss_mib": round(rss_kib / 1024, 1),
            "memory_mib": 512,
        }, indent=2))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        for line in subprocess.run(["pgrep", "-f", state], capture_output=True, text=True).stdout.split():
            os.kill(int(line), signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
