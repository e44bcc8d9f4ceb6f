"""The KCM experiment (bench.py --profile kcm, make bench-kcm), run inside
the VM: ktcp-msg-server (plain TCP) and ktcp-kcm-server (AF_KCM) under the
same msg-bench load, one after the other in one boot, for these cases:

  large   ~5 KB messages, no work
  work    small requests, work done in the serving thread, one client
          pipelining (the case KCM won: its workers share one connection).
          2 ms of work: under QEMU's software emulation each message costs
          ~1 ms of emulated kernel time, and the work must stay the
          dominant cost, as it was on the cover letter's hardware
  heavy   the same with 20 ms of work: on a loaded host the VM's vCPUs get
          a fraction of a core, and only work this long outweighs the
          emulated per-message cost enough to show the load balancing
  tiny    deep pipelining of tiny messages (the case KCM lost)

Every case runs KCM_ROUNDS times with the order of the two servers
alternating; the table reports the median QPS of each.

Environment: KCM_DURATION (default 8 s per run), KCM_ROUNDS (3), KCM_THREADS
(server workers, default one per vCPU). Writes <case>-<server>-<round>.json
(msg-bench --json) and .stats (the server's counters at exit), servers.log,
then table.md and summary.json."""
import json
import os
import platform
import statistics
import subprocess

import bench
import engines as eng

ENV_KEYS = ("KCM_DURATION", "KCM_ROUNDS", "KCM_THREADS")
VM_TIMEOUT_S = 1800

# name, connections, depth, size, work_us
CASES = [("large", 8, 1, 5000, 0),
         ("work", 1, 8, 64, 2000),
         ("heavy", 1, 8, 64, 20000),
         ("tiny", 4, 128, 8, 0)]

# name, workload, published (plain QPS, latency µs), published KCM
PUBLISHED = [("large", "~5 KB messages, no work", None, None),
             ("work", "small requests, 2 ms work in the serving thread", (14282, 559), (23192, 344)),
             ("heavy", "small requests, 20 ms work in the serving thread", (14282, 559),
              (23192, 344)),
             ("tiny", "deep pipelining of tiny messages", (1863429, None), (1337713, None))]

SERVERS = {"msg": eng.MsgServer, "kcm": eng.KcmServer}


def log(msg):
    bench.log(f"experiment: {msg}")


def settings():
    return {"duration": int(os.environ.get("KCM_DURATION", 8)),
            "rounds": int(os.environ.get("KCM_ROUNDS", 3)),
            "threads": int(os.environ.get("KCM_THREADS", os.cpu_count()))}


def run_case(server, tag, case, s, out):
    """One run: the server (msg or kcm) under msg-bench for case, into
    <tag>.json and <tag>.stats."""
    name, conns, depth, size, work = case
    log(f"{tag}: {conns} conns x depth {depth}, {size} B, {work} us work")
    e = SERVERS[server](out).start(threads=s["threads"], stats_file=os.path.join(out, f"{tag}.stats"),
                                   log=os.path.join(out, "servers.log"))
    try:
        argv = [os.path.join(eng.BUILD, "msg-bench"), "--port", str(e.port),
                "--connections", str(conns), "--depth", str(depth), "--size", str(size),
                "--work-us", str(work), "--duration", str(s["duration"]), "--warmup", "1",
                "--json"]
        with open(os.path.join(out, f"{tag}.json"), "w") as f:
            rc = subprocess.run(argv, stdout=f, timeout=s["duration"] + 120).returncode
        if rc:
            log(f"{tag}: msg-bench reported errors")
    finally:
        e.stop(check=False)


def run(out):
    """The whole experiment, inside the VM."""
    s = settings()
    eng.raise_nofile(65536)
    subprocess.run(["modprobe", "kcm"], check=True, timeout=60)
    for rnd in range(1, s["rounds"] + 1):
        for case in CASES:
            for server in (("msg", "kcm") if rnd % 2 else ("kcm", "msg")):
                run_case(server, f"{case[0]}-{server}-{rnd}", case, s, out)
    print(report(out, s))


def load(out, rounds, name, server):
    runs = []
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"{name}-{server}-{r}.json")
        if os.path.exists(p) and os.path.getsize(p):
            with open(p) as f:
                runs.append(json.load(f))
    return runs


def worker_messages(out, rounds, name, server):
    per = []
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"{name}-{server}-{r}.stats")
        if os.path.exists(p):
            with open(p) as f:
                kv = dict(line.split() for line in f.read().splitlines())
            per.append("/".join(kv[k] for k in sorted(kv) if k.startswith("worker")))
    return per


def report(out, s):
    """table.md and summary.json from the runs in out; the table and the
    per-case figures as text."""
    rounds = s["rounds"]
    rows = ["| case | workload | plain QPS | KCM QPS | KCM/plain | plain p50 / p99 µs "
            "| KCM p50 / p99 µs | published plain → KCM | published ratio |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    summary = {}
    for name, desc, pub_plain, pub_kcm in PUBLISHED:
        m, k = load(out, rounds, name, "msg"), load(out, rounds, name, "kcm")
        if not m or not k:
            rows.append(f"| {name} | {desc} | (no result) | | | | | | |")
            continue
        mq = statistics.median(r["qps"] for r in m)
        kq = statistics.median(r["qps"] for r in k)
        mr = min(m, key=lambda r: abs(r["qps"] - mq))
        kr = min(k, key=lambda r: abs(r["qps"] - kq))
        wl = (f'{mr["connections"]} conn × depth {mr["depth"]}, {mr["size"]} B body, '
              f'{mr["work_us"]} µs')
        errs = sum(sum(r["errors"].values()) for r in m + k)
        pub = "—" if pub_plain is None else f"{pub_plain[0]:,} → {pub_kcm[0]:,}"
        pubr = "—" if pub_plain is None else f"{pub_kcm[0] / pub_plain[0]:.2f}"
        if pub_plain and pub_plain[1]:
            pub += f" (latency {pub_plain[1]} → {pub_kcm[1]} µs)"
        rows.append(f"| {name} | {wl} | {mq:,.0f} | {kq:,.0f} | {kq / mq:.2f} | "
                    f'{mr["latency_us"]["p50"]:.0f} / {mr["latency_us"]["p99"]:.0f} | '
                    f'{kr["latency_us"]["p50"]:.0f} / {kr["latency_us"]["p99"]:.0f} | {pub} | {pubr} |'
                    + (f" ⚠ {errs} errors" if errs else ""))
        summary[name] = {"plain_qps": [r["qps"] for r in m], "kcm_qps": [r["qps"] for r in k],
                         "plain_worker_messages": worker_messages(out, rounds, name, "msg"),
                         "kcm_worker_messages": worker_messages(out, rounds, name, "kcm")}
    model = "?"
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f
                      if line.startswith("model name")), "?")
    cond = (f"kernel {platform.release()}, {os.cpu_count()} vCPUs ({model}; "
            f"{'KVM' if 'KVM' in model else 'QEMU TCG software emulation'}), "
            f"loopback 127.0.0.1, {s['threads']} server worker threads, msg-bench with 1 client "
            f"thread, {s['duration']} s measured after 1 s warm-up, median of {rounds} runs per "
            "cell, server order alternating")
    table = "\n".join(rows)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(f"Conditions: {cond}\n\n{table}\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"conditions": cond, "cases": summary}, f, indent=1)
    text = [f"Conditions: {cond}\n\n{table}"]
    for name, c in summary.items():
        text.append(f"{name}: plain {c['plain_qps']} kcm {c['kcm_qps']}; per-worker messages "
                    f"plain {c['plain_worker_messages']} kcm {c['kcm_worker_messages']}")
    return "\n".join(text)
