"""The echo bench (bench.py --profile echo, make bench-echo), run inside the
VM: kecho.ko in each mode, then the user-space ktcp-echo, under the same
echo-bench load one after the other in one boot. TIME-WAIT sockets left by
one run are dropped with drop_tcp_socket.ko before the next.

Environment: BENCH_CLIENTS (default 1000), BENCH_ROUNDS (20), BENCH_MIN_LEN
(1), BENCH_MAX_LEN (4096). Writes, per engine, <name>.json (echo-bench
--json) and <name>.samples, then results.md, results.json and latency.png
(a latency CDF per engine)."""
import glob
import json
import os
import platform
import subprocess

import bench
import engines as eng

ENV = {"BENCH_CLIENTS": 1000, "BENCH_ROUNDS": 20, "BENCH_MIN_LEN": 1, "BENCH_MAX_LEN": 4096}
ENV_KEYS = tuple(ENV)
VM_TIMEOUT_S = 3000


def log(msg):
    bench.log(f"bench-echo: {msg}")


def settings():
    return {k: int(os.environ.get(k, v)) for k, v in ENV.items()}


def run_one(e, out, s):
    """echo-bench against the started engine e: <name>.json and .samples."""
    name = e.name
    log(f"{name}: {s['BENCH_CLIENTS']} clients x {s['BENCH_ROUNDS']} rounds, "
        f"{s['BENCH_MIN_LEN']}..{s['BENCH_MAX_LEN']} bytes")
    argv = [os.path.join(eng.BUILD, "echo-bench"), "--host", "127.0.0.1", "--port", str(e.port),
            "--clients", str(s["BENCH_CLIENTS"]), "--rounds", str(s["BENCH_ROUNDS"]),
            "--min-len", str(s["BENCH_MIN_LEN"]), "--max-len", str(s["BENCH_MAX_LEN"]),
            "--seed", "1", "--timeout", "60000",
            "--samples", os.path.join(out, f"{name}.samples"), "--json"]
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        rc = subprocess.run(argv, stdout=f, timeout=VM_TIMEOUT_S).returncode
    if rc:
        log(f"{name}: echo-bench reported failed clients or mismatches (in {name}.json)")
    log(f"dropped {bench.drop_time_wait()} TIME-WAIT sockets")


def run(out):
    """The whole bench, inside the VM."""
    s = settings()
    eng.raise_nofile(65536)
    tmp = os.path.join(out, "logs")
    os.makedirs(tmp, exist_ok=True)
    eng.run(["insmod", eng.DROP_KO])
    try:
        engines = [eng.KernelEcho(m) for m in eng.KECHO_MODES] + [eng.UserEcho(tmp)]
        for e in engines:
            e.start(idle_timeout_ms=None, max_conns=None, settle=False,
                    **({} if e.kernel else {"threads": os.cpu_count()}))
            try:
                run_one(e, out, s)
            finally:
                e.stop(check=False)
    finally:
        subprocess.run(["rmmod", "drop_tcp_socket"], stderr=subprocess.DEVNULL, timeout=30)
    accel = os.environ.get("KTCP_VM_ACCEL") or "unknown"
    cond = (f"kernel {platform.release()}, {os.cpu_count()} vCPUs (QEMU, {accel} acceleration), "
            f"{s['BENCH_CLIENTS']} clients released together, {s['BENCH_ROUNDS']} rounds each, "
            f"random lengths {s['BENCH_MIN_LEN']}..{s['BENCH_MAX_LEN']} bytes, "
            "one connection per client kept open")
    print(report(out, cond))


def report(out, conditions):
    """results.md, results.json and latency.png from the runs in out; the
    table as text."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        if os.path.basename(path) == "results.json":
            continue
        with open(path) as f:
            rows[os.path.basename(path)[:-5]] = json.load(f)
    peer = rows.get("ktcp-echo")
    lines = ["# Echo bench\n", f"Conditions: {conditions}\n",
             "| engine | req/s | × ktcp-echo | p50 µs | p90 µs | p99 µs | max µs | ok | mismatches "
             "| failed clients | errors by kind |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lat = r["latency_us"]
        ratio = f"{r['req_per_s'] / peer['req_per_s']:.2f}" if peer and peer["req_per_s"] else "-"
        errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items() if v) or "0"
        lines.append(f"| {name} | {r['req_per_s']:.0f} | {ratio} | {lat['p50']:.0f} | "
                     f"{lat['p90']:.0f} | {lat['p99']:.0f} | {lat['max']:.0f} | {r['ok']} | "
                     f"{r['mismatches']} | {r['failed_clients']} | {errors} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"conditions": conditions, "runs": rows}, f, indent=1)
    plot(out, rows, conditions)
    return "\n".join(lines)


def plot(out, rows, conditions):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in rows:
        samples = os.path.join(out, name + ".samples")
        if not os.path.exists(samples):
            continue
        vals = []
        with open(samples) as f:
            for line in f:
                tok = line.strip().split(",")[0]
                if tok.isdigit():
                    vals.append(int(tok) / 1000.0)
        vals.sort()
        if vals:
            n = len(vals)
            ax.plot(vals, [(i + 1) / n for i in range(n)], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("round-trip latency (µs, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("echo bench: latency CDF\n" + conditions, fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "latency.png"), dpi=110)
    plt.close(fig)
