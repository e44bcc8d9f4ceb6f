#!/usr/bin/env python3
"""make bench-floor: every HTTP engine against the floor server and nginx,
in alternating rounds, in a private network namespace.

    tools/bench/floor_ab.py [--out DIR] [--rounds R] [--engines A,B] [--points P,Q]
                            [--workers W] [--scale S]
    tools/bench/floor_ab.py --publish RESULTS   # docs/bench/floor.json + BENCHMARKS.md

The whole run happens in a network namespace of its own (unshare -n, lo
up), so the kernel's TCP counters (/proc/net/snmp, /proc/net/netstat)
and the TIME-WAIT sockets it reads are this run's alone, not those of
whatever else runs on the host. Per point (workload and connections) and
round, the engines run back to back, the order rotated by one each round
(tools/bench/plan.rotated). Each run is htstress, a thread per core, with a request count
(bounded by it and by a timeout), under SCHED_BATCH (--sched-batch: a
client thread that wakes does not preempt a server's worker on the CPU
they share); for each the tool records

- server CPU per request: the CPU-time clocks of every process of the
  server over the run, split into user and kernel time in the ratio of
  their /proc/PID/stat ticks;
- client CPU per request (htstress's rusage) and the requests a second;
- segments per request both ways (Tcp InSegs: on loopback every segment
  is received once), pure ACKs, delayed ACKs, TIME-WAIT sockets made
  (TcpExt TW), and the TIME-WAIT sockets of the server's connections
  held at the end of the run by the server against those held by the
  clients (/proc/net/tcp state 06: who closed first; earlier rounds'
  that have not expired included);
- context switches and CPU migrations of the server's threads
  (/proc/PID/task/TID/sched).

A figure is the median of the rounds with the largest distance of a round
from it; ratios are medians over the floor's and nginx's medians. The
host's load average at the start and end is kept beside the figures."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (puts tools/ on sys.path)
import cost  # noqa: E402
import engines as eng  # noqa: E402
import plan  # noqa: E402

TOP = eng.TOP
NETNS_MARK = "KTCP_FLOOR_AB_NETNS"
# point -> (workload, connections, requests per run at scale 1)
POINTS = {
    "small-close-100": ("small-close", 100, 5000),
    "small-close-1000": ("small-close", 1000, 5000),
    "small-keepalive-100": ("small-keepalive", 100, 30000),
    "1mib-10": ("1mib", 10, 1000),
}
ENGINES = ["nginx", "floor", "floor-http", "ktcp-httpd-epoll", "ktcp-httpd-mn"]
COUNTERS = ("TcpInSegs", "TcpExtTCPPureAcks", "TcpExtDelayedACKs", "TcpExtTW",
            "TcpPassiveOpens", "TcpExtTCPHPAcks")


def log(msg):
    print(msg, flush=True)


def net_counters():
    """{'TcpInSegs': n, 'TcpExtTW': n, ...} from /proc/net/snmp and netstat."""
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        with open(path) as f:
            lines = f.read().splitlines()
        for names, values in zip(lines[::2], lines[1::2]):
            ks, vs = names.split(), values.split()
            for k, v in zip(ks[1:], vs[1:]):
                if v.lstrip("-").isdigit():
                    out[ks[0].rstrip(":") + k] = int(v)
    return out


def time_wait_split(port):
    """TIME-WAIT sockets of connections to port: (held by the server,
    whose local port it is: the server closed first; held by the client,
    whose remote port it is: the client closed first)."""
    server = client = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    p = line.split()
                    if p[3] != "06":
                        continue
                    if int(p[1].rsplit(":", 1)[1], 16) == port:
                        server += 1
                    elif int(p[2].rsplit(":", 1)[1], 16) == port:
                        client += 1
        except FileNotFoundError:
            pass
    return server, client


def server_cpu(e):
    """(CPU µs, user ticks, kernel ticks) of every process of engine e."""
    total = ut = kt = 0
    for pid in e.pids():
        try:
            t, u, k = cost.proc_cpu_us(pid)
        except (OSError, ValueError):
            continue
        total, ut, kt = total + t, ut + u, kt + k
    return total, ut, kt


def task_counts(e):
    """Summed over every thread of every process of engine e: voluntary and
    involuntary context switches, and migrations between CPUs."""
    out = {"voluntary_switches": 0, "involuntary_switches": 0, "migrations": 0}
    keys = {"nr_voluntary_switches": "voluntary_switches",
            "nr_involuntary_switches": "involuntary_switches",
            "se.nr_migrations": "migrations"}
    for pid in e.pids():
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/sched") as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k.strip() in keys:
                            out[keys[k.strip()]] += int(float(v))
            except (OSError, ValueError):
                continue
    return out


def strace_run(e, wl, conc, n, out):
    """System calls per request with every thread of the server under
    strace -f -c for one run (its CPU figures are not kept)."""
    path = os.path.join(out, f"strace-{e.name}-{wl}-{conc}.txt")
    p = subprocess.Popen(["strace", "-f", "-c", "-o", path, "-p", str(e.proc.pid)]
                         + [a for pid in e.pids()[1:] for a in ("-p", str(pid))],
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not all(cost.traced_by(pid, p.pid) for pid in e.pids()):
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            return {"status": "error", "reason": "strace did not attach"}
        time.sleep(0.02)
    try:
        r = one_run(e, wl, conc, n)
    finally:
        p.send_signal(2)
        p.wait(timeout=60)
    if r["status"] != "ok":
        return r
    calls, errors = cost.parse_strace(path)
    return {"status": "ok", "per_request": sum(calls.values()) / n,
            "by_name": {k: v / n for k, v in sorted(calls.items())},
            "errors": {k: v / n for k, v in sorted(errors.items())}}


def one_run(e, wl, conc, n):
    w = cost.WORKLOADS[wl]
    # a client thread per core, as make bench runs it: SYNs from every CPU
    # (the servers give a connection to the worker of its SYN's CPU; one
    # client thread would send them all to one worker)
    threads = min(conc, os.cpu_count() or 1)
    argv = [os.path.join(eng.BUILD, "htstress"), "-n", str(n), "-c", str(conc), "-t", str(threads),
            "--timeout", "20000", "--json", "--sched-batch"] + (["-k"] if w["keep_alive"] else []) + \
        [f"http://127.0.0.1:{e.port}{w['path']}"]
    s0, c0, k0, t0 = server_cpu(e), os.times(), net_counters(), task_counts(e)
    w0 = time.monotonic()
    raw, err, _ = bench.run_tool(argv, 120)
    wall = time.monotonic() - w0
    s1, c1, k1, t1 = server_cpu(e), os.times(), net_counters(), task_counts(e)
    tw = time_wait_split(e.port)
    if raw is None:
        return {"status": "error", "reason": f"htstress: {err}"}
    if raw["good"] != n or raw["errors"]["total"]:
        return {"status": "error", "reason": f"htstress: {raw['good']} of {n} good, "
                                             f"{raw['errors']['total']} errors"}
    cpu = s1[0] - s0[0]
    ut, kt = s1[1] - s0[1], s1[2] - s0[2]
    user = cpu * ut / max(1, ut + kt)
    r = {"status": "ok", "n": n, "wall_s": round(wall, 3), "requests_per_s": n / wall,
         "server_us": cpu / n, "server_user_us": user / n, "server_kernel_us": (cpu - user) / n,
         "client_us": (c1.children_user + c1.children_system - c0.children_user
                       - c0.children_system) * 1e6 / n,
         "time_wait_server": tw[0], "time_wait_client": tw[1],
         "client_sched": raw.get("sched")}
    for k in COUNTERS:
        r[k] = (k1.get(k, 0) - k0.get(k, 0)) / n
    for k in t0:
        r[k] = (t1[k] - t0[k]) / n
    return r


def median_of(rs, key):
    vals = [r[key] for r in rs if r.get("status") == "ok"]
    if not vals:
        return None, None
    m = statistics.median(vals)
    spread = max(abs(v - m) for v in vals) / m * 100 if m else 0.0
    return m, spread


def summarise(doc):
    """Medians per engine and point, and the ratios to the floor and nginx."""
    out = {}
    for pt, by_engine in doc["runs"].items():
        out[pt] = {}
        for name, rs in by_engine.items():
            s = {"rounds_ok": sum(1 for r in rs if r.get("status") == "ok"),
                 "rounds": len(rs)}
            bad = [r for r in rs if r.get("status") != "ok"]
            if bad:
                s["error"] = bad[0].get("reason")
            for key in ("requests_per_s", "server_us", "server_user_us", "server_kernel_us",
                        "client_us", "time_wait_server", "time_wait_client",
                        "voluntary_switches", "involuntary_switches", "migrations") + COUNTERS:
                s[key], s[key + "_spread_pct"] = median_of(rs, key)
            out[pt][name] = s
        for name, s in out[pt].items():
            for ref in ("floor", "nginx"):
                r = out[pt].get(ref)
                if r and r.get("server_us") and s.get("server_us") and name != ref:
                    s[f"cpu_x_{ref}"] = s["server_us"] / r["server_us"]
                    s[f"rps_x_{ref}"] = s["requests_per_s"] / r["requests_per_s"]
    return out


def run(args):
    out = args.out or os.path.join(TOP, "results", "floor-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    ctx = bench.Ctx()
    ctx.tmp = tempfile.mkdtemp(prefix="ktcp-floor-")
    ctx.docroot = os.path.join(ctx.tmp, "www")
    bench.make_docroot(ctx.docroot)
    ctx.workers = args.workers
    eng.raise_nofile()
    cond = bench.conditions("host")
    cond.update({"netns": True, "workers": args.workers, "rounds": args.rounds,
                 "scale": args.scale, "git": cost.git_describe(),
                 "command": " ".join(["tools/bench/floor_ab.py"] + sys.argv[1:])})
    names = [n for n in ENGINES if not args.engines or n in args.engines.split(",")]
    pool = {e.name: e for e in
            [eng.Nginx(), eng.Floor(), eng.FloorHttp()]
            + [eng.UserHttpd(m) for m in eng.HTTPD_MODELS]}
    started, skipped = {}, []
    for name in names:
        e = pool[name]
        why = e.unavailable()
        if why is None:
            try:
                bench.start_engine(e, eng.free_port(), ctx)
                started[name] = e
                continue
            except Exception as ex:  # noqa: BLE001 - the engine's result
                why = f"did not start: {ex}"
        skipped.append({"engine": name, "reason": why})
        log(f"bench-floor: {name}: skipped: {why}")
    points = args.points.split(",") if args.points else list(POINTS)
    doc = {"conditions": cond, "points": {p: POINTS[p] for p in points}, "runs": {},
           "skipped": skipped}
    t0 = time.monotonic()
    try:
        for pt in points:
            if time.monotonic() - t0 > args.budget:
                doc["skipped"].append({"engine": "all", "reason": f"{pt}: over the "
                                                                  f"{args.budget:.0f} s budget"})
                continue
            wl, conc, n = POINTS[pt]
            n = max(conc, int(n * args.scale))
            doc["runs"][pt] = {name: [] for name in started}
            for k in range(args.rounds):
                for name in plan.rotated(list(started), k):
                    e = started[name]
                    r = one_run(e, wl, conc, n)
                    if e.died():
                        # a crash is this round's result; the next starts it anew
                        r = {"status": "crashed", "reason": e.died()}
                        e.stop(check=False)
                        bench.start_engine(e, eng.free_port(), ctx)
                    r["round"] = k + 1
                    doc["runs"][pt][name].append(r)
                    fig = (f"{r['requests_per_s']:,.0f} req/s, server {r['server_us']:.1f} us "
                           f"(kernel {r['server_kernel_us']:.1f}), client {r['client_us']:.1f} "
                           f"us, {r['TcpInSegs']:.2f} segs/req" if r["status"] == "ok"
                           else f"{r['status']}: {r.get('reason')}")
                    log(f"bench-floor: {pt} r{k + 1}/{args.rounds} {name}: {fig}")
            if args.strace:
                doc.setdefault("strace", {})[pt] = {}
                for name, e in started.items():
                    r = strace_run(e, wl, conc, n, out)
                    doc["strace"][pt][name] = r
                    log(f"bench-floor: {pt} strace {name}: " + (
                        f"{r['per_request']:.2f} calls/req: " + ", ".join(
                            f"{k} {v:.2f}" for k, v in r["by_name"].items() if v >= 0.01)
                        if r["status"] == "ok" else f"{r['status']}: {r.get('reason')}"))
    finally:
        for e in started.values():
            e.stop(check=False)
        subprocess.run(["rm", "-rf", ctx.tmp], timeout=60)
    cond["loadavg_end"] = bench.loadavg()
    cond["seconds"] = round(time.monotonic() - t0, 1)
    doc["summary"] = summarise(doc)
    with open(os.path.join(out, "floor.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out, "floor.md"), "w") as f:
        f.write(markdown(doc) + "\n")
    log(f"bench-floor: done in {cond['seconds']:.0f} s: {os.path.relpath(out, os.getcwd())}"
        "/floor.md")
    return doc


def fmt(v, spread=None, digits=1):
    if v is None:
        return "-"
    s = f"{v:,.{digits}f}" if v < 1000 else f"{v:,.0f}"
    return s + (f" ±{spread:.0f}%" if spread is not None else "")


def syscalls_text(doc, pt, name):
    r = (doc.get("strace") or {}).get(pt, {}).get(name)
    if not r or r.get("status") != "ok":
        return "-"
    top = sorted(r["by_name"].items(), key=lambda kv: -kv[1])
    return f"{r['per_request']:.2f}: " + ", ".join(f"{k} {v:.2f}" for k, v in top if v >= 0.05)


def ratio(s, key):
    return f"×{s[key]:.2f}" if s.get(key) is not None else ""


BEGIN = "<!-- floor:begin -->"
END = "<!-- floor:end -->"


def markdown(doc):
    c = doc["conditions"]
    L = [f"[`docs/bench/floor.json`](docs/bench/floor.json) (`{c['command']}`): {c['date']}, "
         f"git `{c.get('git')}`, **kernel {c['kernel']}, {c['cores']} cores, host load average "
         f"{c['loadavg_start']} → {c.get('loadavg_end', '?')}**; in a network namespace of "
         f"its own; {c['workers']} server workers; {plan.client_note(c)}; medians of {c['rounds']} alternating "
         f"rounds ± the largest distance of a round from the median.", ""]
    for pt, rows in doc["summary"].items():
        wl, conc, _ = doc["points"][pt]
        L += [f"#### {cost.WORKLOADS[wl]['label']}, {conc} connections",
              "| engine | req/s | × floor | × nginx | server µs/req (user + kernel) | "
              "× floor | × nginx | client µs/req | segments/req | pure ACKs/req | "
              "TIME-WAIT held by server / by client | context switches/req (voluntary + "
              "involuntary) | CPU migrations/req | system calls/req (strace run) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, s in rows.items():
            if not s.get("rounds_ok"):
                L.append(f"| {name} | error: {s.get('error', '?')} |" + " |" * 12)
                continue
            L.append(
                f"| {name} | {fmt(s['requests_per_s'], s['requests_per_s_spread_pct'])} | "
                f"{ratio(s, 'rps_x_floor')} | {ratio(s, 'rps_x_nginx')} | "
                f"{fmt(s['server_us'], s['server_us_spread_pct'])} "
                f"({fmt(s['server_user_us'])} + {fmt(s['server_kernel_us'])}) | "
                f"{ratio(s, 'cpu_x_floor')} | {ratio(s, 'cpu_x_nginx')} | "
                f"{fmt(s['client_us'], s['client_us_spread_pct'])} | "
                f"{fmt(s['TcpInSegs'], digits=2)} | {fmt(s['TcpExtTCPPureAcks'], digits=2)} | "
                f"{fmt(s['time_wait_server'], digits=0)} / "
                f"{fmt(s['time_wait_client'], digits=0)} | "
                f"{fmt(s['voluntary_switches'], digits=2)} + "
                f"{fmt(s['involuntary_switches'], digits=2)} | {fmt(s['migrations'], digits=3)} | "
                f"{syscalls_text(doc, pt, name)} |")
        L.append("")
    for s in doc["skipped"]:
        L.append(f"- {s['engine']} skipped: {s['reason']}")
    L.append("")
    return "\n".join(L).rstrip()


def publish(src, md=os.path.join(TOP, "BENCHMARKS.md")):
    with open(os.path.join(src, "floor.json")) as f:
        doc = json.load(f)
    dest = os.path.join(TOP, "docs", "bench", "floor.json")
    with open(dest, "w") as f:
        json.dump(doc, f, indent=1)
    with open(md) as f:
        text = f.read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        raise SystemExit(f"{md}: no {BEGIN} ... {END} section")
    section = (BEGIN + "\n<!-- Generated by tools/bench/floor_ab.py --publish from "
               "docs/bench/floor.json; edit the prose outside the floor markers. -->\n\n"
               + markdown(doc) + "\n" + END)
    with open(md, "w") as f:
        f.write(text[:a] + section + text[b + len(END):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="results folder (default results/floor-<timestamp>)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--engines", help=f"comma-separated, of {','.join(ENGINES)} (default all)")
    ap.add_argument("--points", help=f"comma-separated, of {','.join(POINTS)} (default all)")
    ap.add_argument("--workers", type=int, default=os.cpu_count(),
                    help="server workers (default one per core, as make bench)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply each run's requests")
    ap.add_argument("--budget", type=float, default=200,
                    help="seconds; points not started by then are skipped (default 200)")
    ap.add_argument("--strace", action="store_true",
                    help="after each point's rounds, one more run per engine under strace -f -c: "
                         "system calls per request under load")
    ap.add_argument("--publish", metavar="RESULTS",
                    help="RESULTS/floor.json to docs/bench/ and BENCHMARKS.md's tables")
    a = ap.parse_args()
    if a.publish:
        publish(a.publish)
        return 0
    if os.environ.get(NETNS_MARK) != "1":
        # the same command in a network namespace of its own, lo up
        cmd = ("ip link set lo up && exec " + " ".join(
            subprocess.list2cmdline([x]) for x in [sys.executable, os.path.abspath(__file__)]
            + sys.argv[1:]))
        return subprocess.run(["unshare", "-n", "sh", "-c", cmd],
                              env=dict(os.environ, **{NETNS_MARK: "1"})).returncode
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
