#!/usr/bin/env python3
"""ktcp bench: every engine beside nginx on the same workloads, in one run.

    tools/bench/bench.py [--profile full|quick|https|smoke] [--out DIR] [--no-vm] [--no-host]
    tools/bench/bench.py --publish results/<ts> [--docs-dir DIR] [--bench-md FILE]
    tools/bench/bench.py --profile echo|kcm [--out DIR]

The host phase runs here (ktcp-httpd in each model, ktcp-echo, nginx, lwan
when LWAN=/path/to/lwan is set or lwan is on PATH); the VM phase boots scripts/vm once and runs this same file
inside with --phase vm (khttpd.ko in each mode, kecho.ko in each mode,
the user-space engines and nginx, all inside the guest). Each phase writes
<out>/<env>.json; the host then merges them into results.json, results.md
and the PNG plots (tools/bench/report.py).

The HTTPS points (suite https; the https profile alone: make bench-https)
run htstress over TLS (https://: a full handshake per connection, no
session kept) against nginx with its records written by OpenSSL
(nginx-tls, the peer), nginx handing them to kTLS (nginx-ktls, in the
guest: the host has no tls ULP), ktcp-httpd epoll and mn over TLS (kTLS
in the guest), and khttpd behind its agent ktcp-tlsd (in the guest).

Each HTTP and echo point runs the profile's rounds (full, quick: 3), the
engines alternating within each round and the order rotated by one from
round to round (plan.rotated); a record keeps every round and its figure is
their median, its ratio the median over the peer's median at the point.
htstress runs under SCHED_BATCH (--sched-batch): on cores the client
shares with the server, a client thread that wakes waits for the running
worker's slice to end instead of preempting it mid-response.

--publish writes a results folder's figures, without the tools' raw output,
to docs/bench/bench-<env>.json, copies its plots to docs/bench/, and
regenerates the tables of BENCHMARKS.md between its bench markers from
every docs/bench/bench-<env>.json (report.publish).

Every run is bounded by count and time; a run that would overrun the
profile's budget is skipped and listed as such, never waited for. An
engine that crashes, fails to start or answers wrongly gets that as the
run's result ("crashed", "error: ..."), and the bench goes on.

Two profiles are experiments of their own, each one VM boot, results in
results/<timestamp>-<profile>/: echo (kecho.ko in each mode and ktcp-echo
under echo-bench, echo_profile.py) and kcm (the KCM server and its plain-TCP
twin under msg-bench, kcm_profile.py)."""
import argparse
import gzip
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import engines as eng  # noqa: E402  (tools/engines)
import memcheck  # noqa: E402
import plan  # noqa: E402

TOP = eng.TOP
PY = sys.executable


# What each server runs with in the bench, beside the document root: one
# worker per core (the cost bench: 1), keep-alive 60 s, the servers' own
# connection limits (the modules': 20000) with no per-address share (every
# client is 127.0.0.1: the memory check holds 10,000 connections from it, past
# the default quarter of max_conns), ktcp-httpd as nginx ("user root;").
BENCH_OPTIONS = {
    "ktcp-httpd": {"idle_timeout_ms": 60000, "max_conns": None, "max_conns_per_ip": 0,
                   "gzip": None, "user": "root"},
    "ktcp-echo": {"idle_timeout_ms": None, "max_conns": None, "max_conns_per_ip": 0,
                  "settle": False},
    "khttpd": {"idle_timeout_ms": 60000, "max_conns": 20000, "max_conns_per_ip": 0},
    "kecho": {"idle_timeout_ms": 60000, "max_conns": 20000, "max_conns_per_ip": 0,
              "settle": False},
}


def workers(ctx):
    """Worker threads or processes an engine runs: one per core for make
    bench; the cost bench (cost.py) sets ctx.workers = 1."""
    return getattr(ctx, "workers", None) or os.cpu_count()


def start_engine(e, port, ctx):
    """Start engine e on port as the bench runs it: serving ctx.docroot,
    logging into ctx.tmp, under ctx.wrap (the cost bench's valgrind) if
    set, given ctx.start_timeout_s (default 10 s) to listen. A module left
    loaded by an earlier run is unloaded first."""
    o = dict(BENCH_OPTIONS.get(e.family, {}))
    if getattr(ctx, "long_idle", False):
        # the idle-memory check opens its connections for longer than the
        # bench's 60 s keep-alive
        o["idle_timeout_ms" if e.family != "nginx" else "keepalive_s"] = 600000 \
            if e.family != "nginx" else 600
        if getattr(e, "tls", False) and e.family != "nginx":
            # and a handshake may wait its turn as long (nginx gives it its
            # 60 s client_header_timeout): under emulation 2,000 handshakes
            # queue past the 10 s default, which closed most of them
            o["tls_handshake_timeout_ms"] = 600000
    if e.kernel:
        e.unload_stale()
    else:
        o.update(threads=workers(ctx), logdir=ctx.tmp, nofile="max", wrap=getattr(ctx, "wrap", None),
                 start_timeout=getattr(ctx, "start_timeout_s", 10.0))
        if e.family == "nginx":
            o["gzip_static"] = getattr(ctx, "gzip_static", False)
    return e.start(ctx.docroot, port, **o)


def log(msg):
    print(msg, flush=True)


def fmt_s(s):
    s = max(0, int(s))
    return f"{s // 60}:{s % 60:02d}"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def tool_version(name):
    """'htstress 0.3.0 (<git>)' from build/<name> --version, or ''."""
    try:
        r = subprocess.run([os.path.join(eng.BUILD, name), "--version"], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def conditions(env, vm_mode=None):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    nginx_v = ""
    try:
        r = subprocess.run(["nginx", "-v"], capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin"))
        nginx_v = r.stderr.strip().replace("nginx version: ", "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    mem_kib = 0
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    c = {
        "env": env,
        "where": "host" if env == "host" else "QEMU guest (scripts/vm)",
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_mib": mem_kib // 1024,
        "nginx": nginx_v,
        "python": platform.python_version(),
        "htstress": tool_version("htstress"),
        "loadavg_start": loadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loopback": "127.0.0.1",
        # htstress --sched-batch (run_http, cost.py, floor_ab.py)
        "client_sched": "SCHED_BATCH",
    }
    lwan = eng.lwan_path()
    if lwan:
        c["lwan"] = lwan
    if vm_mode:
        c["vm_mode"] = vm_mode
    return c


# ---------------------------------------------------------------- docroot

def https_engines(env):
    """The HTTPS points' engines: nginx over TLS first (the peer), nginx
    with kTLS and khttpd behind ktcp-tlsd in the guest only."""
    engines = [eng.Nginx(tls="user")]
    if env == "vm":
        engines.append(eng.Nginx(tls="ktls"))
    engines += [eng.UserHttpd(m, tls=True) for m in ("epoll", "mn")]
    if env == "vm" and hasattr(eng, "KernelHttpdTls"):
        engines.append(eng.KernelHttpdTls("unbound"))
    return engines


def check_https(e, path, docroot):
    """None when the TLS engine e serves path byte for byte, checked against
    the test CA, else why not."""
    import ssl
    from engines import tlscert
    ctx = tlscert.client_context(e.certs["ca"])
    if plan.HTTPS_TLS_MAX.get(e.name) == "1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{e.port}{path}", timeout=20,
                                    context=ctx) as r:
            body, status = r.read(), r.status
    except Exception as ex:  # noqa: BLE001 - any failure is the reason
        return f"GET {path} over TLS: {ex}"
    want = open(os.path.join(docroot, path.lstrip("/")), "rb").read()
    if status != 200 or body != want:
        return f"GET {path} over TLS: status {status}, {len(body)} bytes (want {len(want)})"
    return None


def make_docroot(root):
    os.makedirs(os.path.join(root, "dir"), exist_ok=True)
    with open(os.path.join(root, "small.txt"), "wb") as f:
        f.write(plan.SMALL_BODY)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        block = bytes((i * 131 + 7) % 256 for i in range(4096))
        f.write(block * (plan.BIG_SIZE // len(block)))
    for i in range(plan.LISTING_ENTRIES):
        with open(os.path.join(root, "dir", f"file-{i:03d}.txt"), "w") as f:
            f.write(f"entry {i}\n")
    rows = "".join(f"<tr><td class=\"n\">row {i}</td><td>ktcp bench page, compressible text "
                   f"{i % 17}</td><td>{i * 37 % 1000}</td></tr>\n" for i in range(1000))
    page = f"<!doctype html><html><body><table>\n{rows}</table></body></html>\n".encode()
    page = (page * (65536 // len(page) + 1))[:65536]
    with open(os.path.join(root, "page.html"), "wb") as f:
        f.write(page)


def check_workload(port, wl, docroot):
    """None when the engine serves the workload's URL correctly, else why not."""
    path, _, _, headers, _ = plan.HTTP_WORKLOADS[wl]
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    for h in headers:
        k, v = h.split(":", 1)
        req.add_header(k.strip(), v.strip())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            body, status, enc = r.read(), r.status, r.headers.get("Content-Encoding")
    except Exception as e:  # noqa: BLE001 - any failure is the reason
        return f"GET {path}: {e}"
    if status != 200:
        return f"GET {path}: status {status}"
    if wl == "gzip":
        if enc != "gzip":
            return f"GET {path} with Accept-Encoding: gzip answered Content-Encoding {enc}"
        body = gzip.decompress(body)
        if body != open(os.path.join(docroot, "page.html"), "rb").read():
            return f"GET {path}: gunzipped body differs from the file"
    elif wl == "listing":
        if b"file-042.txt" not in body:
            return f"GET {path}: listing lacks file-042.txt"
    else:
        want = open(os.path.join(docroot, path.lstrip("/")), "rb").read()
        if body != want:
            return f"GET {path}: body differs from the file ({len(body)} vs {len(want)} bytes)"
    return None


# ---------------------------------------------------------------- TIME-WAIT

def _hexaddr(field, v6):
    a, p = field.split(":")
    raw = bytes.fromhex(a)
    if v6:
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        import socket
        return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{int(p, 16)}"
    return f"{'.'.join(str(b) for b in raw[::-1])}:{int(p, 16)}"


def time_wait_pairs():
    pairs = []
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fl = line.split()
                    if fl[3] == "06":
                        pairs.append(f"{_hexaddr(fl[1], v6)} {_hexaddr(fl[2], v6)}")
        except OSError:
            pass
    return pairs


def time_wait_count():
    try:
        with open("/proc/net/sockstat") as f:
            m = re.search(r"\btw (\d+)", f.read())
            return int(m.group(1)) if m else 0
    except OSError:
        return 0


def drop_time_wait():
    """Inside the VM: remove every TIME-WAIT socket (drop_tcp_socket.ko),
    in writes under the module's 256 KiB limit."""
    pairs = time_wait_pairs()
    chunk = []
    size = 0
    for p in pairs + [None]:
        if p is None or size + len(p) + 1 > 200_000:
            if chunk:
                with open("/proc/net/drop_tcp_sock", "w") as f:
                    f.write("\n".join(chunk))
            chunk, size = [], 0
        if p is not None:
            chunk.append(p)
            size += len(p) + 1
    return len(pairs)


# 70 % of the default ephemeral range (32768-60999): above it, a
# connection-per-request run on the host waits (bounded) for TIME-WAIT
# sockets on its server port to expire. With tcp_tw_reuse=2 (loopback) and
# the kernel's cap on TIME-WAIT buckets this rarely triggers; the count is
# kept in the run's record, and connect errors would show in its errors.
HOST_TW_LIMIT = 20000


def host_wait_time_wait(port, max_wait_s=5.0):
    end = time.monotonic() + max_wait_s
    while True:
        n = sum(1 for p in time_wait_pairs() if p.endswith(f":{port}") or f":{port} " in p)
        if n <= HOST_TW_LIMIT or time.monotonic() >= end:
            return n
        time.sleep(1.0)


# ---------------------------------------------------------------- runners

def run_tool(argv, timeout_s):
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                           preexec_fn=eng.raise_nofile)
    except subprocess.TimeoutExpired:
        return None, f"killed after {timeout_s:.0f} s", time.monotonic() - t0
    if r.returncode not in (0, 1):
        return None, f"exit {r.returncode}: {r.stderr.strip()[-300:]}", time.monotonic() - t0
    try:
        return json.loads(r.stdout), None, time.monotonic() - t0
    except ValueError:
        return None, f"unparsable output: {r.stdout[:200]!r} {r.stderr.strip()[-200:]}", \
            time.monotonic() - t0


# An untimed run of each engine before its first HTTPS point (seconds).
WARMUP_S = 0.5


def run_http(run, port):
    c = run["concurrency"]
    argv = [os.path.join(eng.BUILD, "htstress"), "-d", str(run["duration"]), "-c", str(c),
            "-t", str(min(c, os.cpu_count())), "--timeout", str(run["timeout_ms"]), "--json", "--sched-batch"]
    if run["keep_alive"]:
        argv.append("-k")
    for h in run["headers"]:
        argv += ["-H", h]
    scheme = "http"
    if run.get("tls_version"):
        argv += ["--tls-version", run["tls_version"]]
        scheme = "https"
        if run["keep_alive"]:
            # the handshakes before the clock: under emulation a hundred
            # take longer than a run
            argv.append("--connect-first")
    argv.append(f"{scheme}://127.0.0.1:{port}{run['path']}")
    raw, err, _ = run_tool(argv, run["duration"] + run["timeout_ms"] / 1000 + 20)
    if raw is None:
        return {"status": "failed", "reason": err}
    rec = {"raw": raw, "value": raw["req_per_s"], "unit": "req/s",
           "latency_us": raw["latency_us"], "errors": raw["errors"]["total"],
           "mib_per_s": raw["bytes_read"] / raw["seconds"] / 2 ** 20 if raw["seconds"] else 0,
           "bytes_per_response": raw["bytes_read"] / raw["good"] if raw["good"] else 0}
    if "tls" in raw:
        rec["tls"] = raw["tls"]
    if raw["good"] == 0:
        rec.update(status="failed", reason=f"no good response ({raw['errors']['total']} errors, "
                                           f"{raw['bad']} bad)")
    elif raw.get("tls", {}).get("resumed"):
        rec.update(status="failed", reason=f"{raw['tls']['resumed']} TLS sessions resumed: "
                                           "not full handshakes")
    elif raw["bad"] or raw["errors"]["total"] > raw["requests"] / 10:
        rec.update(status="ok", note=f"{raw['bad']} bad, {raw['errors']['total']} errors "
                                     f"of {raw['requests']}")
    else:
        rec["status"] = "ok"
    return rec


def run_echo(run, port, samples):
    argv = [os.path.join(eng.BUILD, "echo-bench"), "--host", "127.0.0.1", "--port", str(port),
            "--clients", str(run["concurrency"]), "--rounds", str(run["rounds"]),
            "--min-len", str(run["min_len"]), "--max-len", str(run["max_len"]), "--seed", "1",
            "--timeout", "10000", "--samples", samples, "--json"]
    raw, err, elapsed = run_tool(argv, 120)
    if raw is None:
        return {"status": "failed", "reason": err}
    fails = sum(raw.get("errors", {}).values()) if isinstance(raw.get("errors"), dict) else 0
    rec = {"raw": raw, "value": raw["req_per_s"], "unit": "req/s",
           "latency_us": raw["latency_us"], "errors": fails + raw.get("mismatches", 0),
           "samples": os.path.relpath(samples, os.path.dirname(os.path.dirname(samples))),
           "status": "ok" if raw.get("ok") else "failed"}
    if not raw.get("ok"):
        rec["reason"] = "no echo completed"
    return rec


def run_lat(run, port):
    argv = [os.path.join(eng.BUILD, "lat"), "-n", str(run["count"]), "-d", str(run["duration"]),
            "--json"]
    if run["mode"] == "echo":
        argv += ["echo", f"127.0.0.1:{port}"]
    else:
        argv += (["--same-core"] if run.get("same_core") else []) + [run["mode"]]
    raw, err, _ = run_tool(argv, run["duration"] + 30)
    if raw is None:
        return {"status": "failed", "reason": err}
    return {"raw": raw, "value": raw["latency_us"]["p50"], "unit": "us p50",
            "latency_us": raw["latency_us"], "errors": 0, "status": "ok"}


def run_memory(run, engine, ctx):
    if ctx.env == "vm":
        # Kernel servers hold their connections in slab, not in any RSS:
        # the guest's slab growth plus the processes' RSS growth.
        rec = memcheck.measure(engine, run["concurrency"], budget_s=run["planned_s"] + 60,
                               kernel=True, echo=run.get("echo", False))
        return {"raw": rec, "value": rec["total_per_conn_kib"],
                "unit": "KiB/conn slab+RSS", "errors": sum(rec["failed"].values()),
                "status": "ok" if rec["connections_idle"] else "failed"}
    rec = memcheck.measure(engine, run["concurrency"], budget_s=60)
    return {"raw": rec, "value": rec["rss_kib"] / 1024, "unit": "MiB VmRSS",
            "errors": sum(rec["failed"].values()), "status": "ok" if rec["connections_idle"] else
            "failed", "aim_mib": 64}


def run_https_memory(run, engine):
    """Idle TLS sessions: the server's RSS and the kernel's slab growth per
    connection held (the slab is the whole machine's: on a shared host it
    moves with others' work too)."""
    import ssl
    from engines import tlscert
    tls = tlscert.client_context(engine.certs["ca"])
    tls.maximum_version = ssl.TLSVersion.TLSv1_2
    rec = memcheck.measure(engine, run["concurrency"], budget_s=run["planned_s"] + 60,
                           kernel=True, tls=tls)
    return {"raw": rec, "value": rec["total_per_conn_kib"], "unit": "KiB/conn RSS+slab",
            "errors": sum(rec["failed"].values()),
            "status": "ok" if rec["connections_idle"] else "failed"}


# ---------------------------------------------------------------- phase

def run_one(run, rec, e, env, ctx, samples_dir, ports, ensure):
    """One run against a started engine e; fills rec."""
    name = run["engine"]
    if run["suite"] in ("http", "https"):
        if run["suite"] == "https":
            why = check_https(e, run["path"], ctx.docroot) if e.kernel \
                else ctx.checks.get(name, {}).get(run["path"])
        else:
            why = check_workload(e.port, run["workload"], ctx.docroot) if e.kernel \
                else ctx.checks.get(name, {}).get(run["workload"])
        if why:
            rec.update(status="failed", reason=f"wrong answer: {why}")
        else:
            if env == "host" and not run["keep_alive"]:
                rec["time_wait_before"] = host_wait_time_wait(e.port)
            rec.update(run_http(run, e.port))
    elif run["suite"] == "echo":
        rnd = f"-r{run['round']}" if run.get("rounds_planned", 1) > 1 else ""
        path = os.path.join(samples_dir, f"{env}-{name}-c{run['concurrency']}{rnd}.txt")
        rec.update(run_echo(run, e.port, path))
    elif run["suite"] == "lat":
        rec.update(run_lat(run, e.port if e else None))
    elif run["suite"] == "https-memory":
        e.stop(check=False)
        ports.pop(name, None)
        ctx.long_idle = True
        try:
            e, err = ensure(name)
        finally:
            ctx.long_idle = False
        if e is None:
            rec.update(status="failed", reason=err)
        else:
            rec.update(run_https_memory(run, e))
            e.stop(check=False)
            ports.pop(name, None)
    elif run["suite"] == "memory":
        # a fresh instance: VmHWM must not remember the load runs
        e.stop(check=False)
        ports.pop(name, None)
        e, err = ensure(name)
        if e is None:
            rec.update(status="failed", reason=err)
        else:
            rec.update(run_memory(run, e, ctx))
            e.stop(check=False)
            ports.pop(name, None)


class Ctx:
    pass


def run_phase(env, profile, out, budget_s):
    ctx = Ctx()
    ctx.env = env
    ctx.tmp = tempfile.mkdtemp(prefix=f"ktcp-bench-{env}-")
    ctx.docroot = os.path.join(ctx.tmp, "www")
    make_docroot(ctx.docroot)
    # The VM's memory check holds its clients' sockets in this process.
    eng.raise_nofile(1 << 16 if env == "vm" else None)
    start = time.monotonic()
    deadline = start + budget_s
    accel = {"tcg": "TCG software emulation", "kvm": "KVM"}.get(
        os.environ.get("KTCP_VM_ACCEL", ""), os.environ.get("KTCP_VM_ACCEL"))
    cond = conditions(env, accel if env == "vm" else None)
    cond["profile"] = profile

    skipped = []
    by_name = {}
    tls_engines = https_engines(env)
    for e in eng.http_engines(env) + eng.echo_engines(env) + tls_engines:
        why = e.unavailable()
        if why:
            skipped.append({"engine": e.name, "reason": why})
        else:
            by_name[e.name] = e
    http_names = [e.name for e in eng.http_engines(env) if e.name in by_name]
    echo_names = [e.name for e in eng.echo_engines(env) if e.name in by_name]
    https_names = [e.name for e in tls_engines if e.name in by_name]
    if env == "vm":
        r = subprocess.run(["insmod", eng.DROP_KO], capture_output=True, text=True, timeout=30)
        if r.returncode and "File exists" not in r.stderr:
            log(f"bench: vm: drop_tcp_socket.ko did not load ({r.stderr.strip()}); "
                "TIME-WAIT sockets stay")
    runs = plan.build(profile, env, http_names, echo_names, https_names)
    samples_dir = os.path.join(out, "samples")
    os.makedirs(samples_dir, exist_ok=True)

    # Persistent user-space engines: up for the whole phase, each on its own
    # port (idle servers cost nothing); kernel modules load per run.
    ports = {}
    failed_start = {}

    def ensure(name):
        e = by_name[name]
        if name in failed_start:
            return None, failed_start[name]
        if e.kernel or name not in ports:
            try:
                port = eng.free_port()
                start_engine(e, port, ctx)
                ports[name] = port
                if name in https_names and not e.kernel:
                    for path in sorted({w[0] for w in plan.HTTPS_WORKLOADS.values()}):
                        why = check_https(e, path, ctx.docroot)
                        if why:
                            ctx.checks.setdefault(name, {})[path] = why
                elif e.proto == "http" and not e.kernel:
                    for wl in (w for w in plan.HTTP_WORKLOADS if plan.serves(name, w)):
                        why = check_workload(port, wl, ctx.docroot)
                        if why:
                            ctx.checks.setdefault(name, {})[wl] = why
            except (RuntimeError, OSError, subprocess.SubprocessError, eng.Unsupported) as ex:
                failed_start[name] = str(ex)
                return None, str(ex)
        return e, None

    ctx.checks = {}
    warmed = set()  # engines whose first HTTPS run had its warm-up
    results = []
    overheads = []
    n = len(runs)
    log(f"bench: {env}: {n} runs planned ({profile}), budget {fmt_s(budget_s)}, "
        f"load average {cond['loadavg_start']}")
    for i, run in enumerate(runs):
        rec = dict(run)
        rec["env"] = env
        name = run["engine"]
        rnd = f" r{run['round']}/{run['rounds_planned']}" if run.get("rounds_planned", 1) > 1 \
            else ""
        now = time.monotonic()
        over = sum(overheads) / len(overheads) if overheads else 0.5
        if now + run["planned_s"] + over > deadline:
            rec.update(status="skipped", reason=f"over the {profile} time budget")
            results.append(rec)
            log(f"bench [{i + 1:3d}/{n}] {env} {run['suite']} {run['workload']} "
                f"c={run['concurrency']}{rnd} {name}: skipped (time budget)")
            continue
        t0 = time.monotonic()
        server = name if run["suite"] != "lat" else run.get("server")
        e = None
        if server:
            e, err = ensure(server)
            if e is None:
                rec.update(status="failed", reason=f"did not start: {err}")
        if rec.get("status") != "failed" and run["suite"] == "https" and name not in warmed:
            # An engine's first HTTPS run in a phase paid for what its
            # first connections load (the guest's AES-GCM self-test, the
            # binaries' pages): 40-500 req/s in round 1 against 1,300-2,600
            # after, under emulation. An untimed run before it takes that.
            warmed.add(name)
            warm = dict(run, duration=WARMUP_S)
            try:
                run_one(warm, {}, e, env, ctx, samples_dir, ports, ensure)
                rec["warmed_up_s"] = WARMUP_S
            except Exception as ex:  # noqa: BLE001 - the real run reports
                log(f"bench: {env}: warm-up of {name} failed: {ex}")
        if rec.get("status") != "failed":
            try:
                run_one(run, rec, e, env, ctx, samples_dir, ports, ensure)
            except Exception as ex:  # noqa: BLE001 - an engine's error is a result
                rec.update(status="error", reason=f"{type(ex).__name__}: {ex}")
            finally:
                if e is not None and e.kernel:
                    e.stop(check=False)
            if e is not None and not e.kernel:
                died = e.died()
                if died:
                    # a crash is this run's result; the next run starts it anew
                    tail = e.log_tail(200).replace("\n", " | ")
                    rec.update(status="crashed", reason=f"{server} {died}"
                               + (f"; log: {tail}" if tail else ""))
                    e.proc = None
                    ports.pop(server, None)
        if env == "vm":
            rec["time_wait_dropped"] = drop_time_wait()
        elapsed = time.monotonic() - t0
        rec["elapsed_s"] = round(elapsed, 3)
        overheads.append(max(0.0, elapsed - run["planned_s"]))
        results.append(rec)
        rest = runs[i + 1:]
        avg_over = sum(overheads) / len(overheads)
        eta = sum(r["planned_s"] + avg_over for r in rest)
        eta = min(eta, max(0, deadline - time.monotonic()))
        if rec["status"] == "ok":
            v = rec["value"]
            fig = f"{v:.0f} {rec['unit']}" if v >= 100 else f"{v:.2f} {rec['unit']}"
            peer = plan.PEERS[run["suite"]]
            pv = next((r.get("value") for r in results if r["engine"] == peer and
                       r["suite"] == run["suite"] and r["workload"] == run["workload"] and
                       r["concurrency"] == run["concurrency"] and
                       r.get("round") == run.get("round") and r.get("status") == "ok"), None)
            if pv and name != peer:
                fig += f" (x{v / pv:.2f} {peer})"
            if rec.get("note"):
                fig += f" [{rec['note']}]"
        else:
            fig = f"{rec['status']}: {rec.get('reason', '')}"
        log(f"bench [{i + 1:3d}/{n}] {env} {run['suite']} {run['workload']} "
            f"c={run['concurrency']}{rnd} {name}: {fig} | {fmt_s(time.monotonic() - start)} "
            f"elapsed, ETA {fmt_s(eta)}")

    for e in by_name.values():
        try:
            e.stop(check=False)
        except Exception:  # noqa: BLE001 - best effort at the end
            pass
    if env == "vm":
        subprocess.run(["rmmod", "drop_tcp_socket"], stderr=subprocess.DEVNULL, timeout=30)
    for name, why in failed_start.items():
        skipped.append({"engine": name, "reason": f"did not start: {why}"})
    cond["loadavg_end"] = loadavg()
    cond["seconds"] = round(time.monotonic() - start, 1)
    cond["checks"] = ctx.checks
    import report
    doc = {"env": env, "conditions": cond, "runs": report.merge_rounds(results),
           "skipped": skipped}
    with open(os.path.join(out, f"{env}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    subprocess.run(["rm", "-rf", ctx.tmp], timeout=60)
    return doc


# ---------------------------------------------------------------- VM phase

def run_vm(profile, out, deadline_epoch):
    """Boot the VM once and run the VM phase inside, its runs ending by
    deadline_epoch (the guest's clock starts from the host's); returns a
    skip reason or None. The guest sees only the repository writable, so it
    writes under build/ and the host moves the files into out."""
    left = deadline_epoch - time.time()
    if left < 90:
        return f"not enough of the time budget left for a VM boot ({left:.0f} s)"
    # The modules of the guest's kernel (scripts/vm boots $KERNEL, else
    # 6.1), not of the host's.
    series = os.environ.get("KERNEL") or "6.1"
    try:
        release = subprocess.run([os.path.join(TOP, "scripts", "kernels"), "release", series],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        release = ""
    if not release:
        return f"no kernel release known for KERNEL={series} (scripts/kernels)"
    for name in ("kecho", "drop_tcp_socket"):
        ko = os.path.join(TOP, "build", "modules", release, "kernel", name, name + ".ko")
        if not os.path.exists(ko):
            return f"{os.path.relpath(ko, TOP)} not built (make modules KERNEL={series})"
    stage = tempfile.mkdtemp(prefix="bench-vm-", dir=os.path.join(TOP, "build"))
    # --no-detectors: slub_debug would make every slab object bigger and
    # every allocation slower than a production kernel's
    argv = [os.path.join(TOP, "scripts", "vm"), "--no-detectors", "--timeout", str(int(left + 60)), "--",
            os.path.join(TOP, ".venv", "bin", "python"), os.path.abspath(__file__),
            "--phase", "vm", "--profile", profile, "--out", stage,
            "--deadline", f"{deadline_epoch:.0f}"]
    log(f"bench: vm: booting scripts/vm (one boot for every kernel and user engine), "
        f"runs end by {time.strftime('%H:%M:%S', time.localtime(deadline_epoch))}")
    t0 = time.monotonic()
    load0 = loadavg()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=TOP)
    tail = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-20:]
        if line.startswith(("bench", "scripts/vm")):
            log(line)
    rc = proc.wait()
    log(f"bench: vm: done in {fmt_s(time.monotonic() - t0)} (exit {rc})")
    path = os.path.join(stage, "vm.json")
    if not os.path.exists(path):
        log("\n".join("  | " + t for t in tail))
        return f"the VM phase wrote no vm.json (scripts/vm exit {rc})"
    with open(path) as f:
        doc = json.load(f)
    doc["conditions"]["vm_exit"] = rc
    doc["conditions"]["host_loadavg_start"] = load0
    doc["conditions"]["host_loadavg_end"] = loadavg()
    doc["conditions"]["boot_and_phase_s"] = round(time.monotonic() - t0, 1)
    with open(os.path.join(out, "vm.json"), "w") as f:
        json.dump(doc, f, indent=1)
    os.makedirs(os.path.join(out, "samples"), exist_ok=True)
    for name in os.listdir(os.path.join(stage, "samples")):
        os.replace(os.path.join(stage, "samples", name), os.path.join(out, "samples", name))
    subprocess.run(["rm", "-rf", stage], timeout=60)
    return None


# --profile NAME -> the module that runs that experiment inside the VM
EXPERIMENTS = {"echo": "echo_profile", "kcm": "kcm_profile"}


def run_experiment(profile, out, phase):
    """An experiment profile: inside the VM (--phase vm, or already in it)
    run it into out; on the host boot the VM once to do so. The guest sees
    only the repository writable: a folder elsewhere is filled from a stage
    under build/."""
    mod = importlib.import_module(EXPERIMENTS[profile])
    out = os.path.abspath(out or os.path.join(
        TOP, "results", f"{time.strftime('%Y%m%d-%H%M%S')}-{profile}"))
    if phase == "vm" or eng.in_vm():
        if not eng.in_vm():
            sys.exit(f"bench: --profile {profile} --phase vm runs inside the VM (scripts/vm)")
        os.makedirs(out, exist_ok=True)
        mod.run(out)
        log(f"bench: {profile}: results in {out}")
        return 0
    inside = out if out.startswith(TOP + os.sep) else \
        tempfile.mkdtemp(prefix=f"bench-{profile}-", dir=os.path.join(TOP, "build"))
    env = [f"{k}={os.environ[k]}" for k in mod.ENV_KEYS if k in os.environ]
    argv = [os.path.join(TOP, "scripts", "vm"), "--no-detectors", "--timeout", str(mod.VM_TIMEOUT_S), "--",
            "env", *env, os.path.join(TOP, ".venv", "bin", "python"), os.path.abspath(__file__),
            "--profile", profile, "--phase", "vm", "--out", inside]
    log(f"bench: {profile}: booting scripts/vm, results in {os.path.relpath(out, os.getcwd())}")
    rc = subprocess.run(argv, cwd=TOP).returncode
    if inside != out:
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(inside):
            os.replace(os.path.join(inside, name), os.path.join(out, name))
        os.rmdir(inside)
        log(f"bench: {profile}: moved to {out}")
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="full", choices=sorted(plan.PROFILES) + sorted(EXPERIMENTS))
    ap.add_argument("--out", help="results folder (default results/<timestamp>)")
    ap.add_argument("--no-vm", action="store_true", help="host phase only")
    ap.add_argument("--no-host", action="store_true", help="VM phase only")
    ap.add_argument("--publish", metavar="RESULTS",
                    help="write RESULTS' figures to docs/bench/bench-<env>.json, copy its plots "
                         "to docs/bench/, regenerate the tables of BENCHMARKS.md; then exit")
    ap.add_argument("--docs-dir", default=os.path.join(TOP, "docs", "bench"),
                    help="where --publish writes (default docs/bench)")
    ap.add_argument("--bench-md", default=os.path.join(TOP, "BENCHMARKS.md"),
                    help="the file whose bench markers --publish fills (default BENCHMARKS.md)")
    ap.add_argument("--phase", choices=["vm"], help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.publish:
        import report
        for p in report.publish(a.publish, a.docs_dir, a.bench_md):
            log(f"bench: publish: wrote {os.path.relpath(p, os.getcwd())}")
        return 0
    if a.profile in EXPERIMENTS:
        return run_experiment(a.profile, a.out, a.phase)
    prof = plan.PROFILES[a.profile]

    if a.phase == "vm":
        os.makedirs(a.out, exist_ok=True)
        run_phase("vm", a.profile, a.out, (a.deadline or time.time() + 300) - time.time())
        return 0

    t0 = time.monotonic()
    out = a.out or os.path.join(TOP, "results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    total = prof["total_budget_s"]
    meta = {"profile": a.profile, "command": " ".join(["tools/bench/bench.py"] + sys.argv[1:]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host_loadavg_start": loadavg()}
    try:
        meta["git"] = subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty"],
                                     capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    envs_skipped = {}
    log(f"bench: profile {a.profile}: host phase, then one VM boot; everything ends within "
        f"{fmt_s(total)} (by {time.strftime('%H:%M:%S', time.localtime(time.time() + total))}); "
        f"results in {os.path.relpath(out, os.getcwd())}")
    if not a.no_host:
        run_phase("host", a.profile, out, prof["host"]["budget_s"])
    if "vm" in prof and not a.no_vm:
        # the VM's runs end 25 s before the total budget: shutdown and report
        why = run_vm(a.profile, out, time.time() + total - (time.monotonic() - t0) - 25)
        if why:
            envs_skipped["vm"] = why
            log(f"bench: vm: skipped: {why}")
    elif "vm" in prof:
        envs_skipped["vm"] = "--no-vm given"
    meta["host_loadavg_end"] = loadavg()
    meta["seconds"] = round(time.monotonic() - t0, 1)
    meta["envs_skipped"] = envs_skipped
    import report
    report.write(out, meta)
    log(f"bench: results in {os.path.relpath(out, os.getcwd())} ({fmt_s(meta['seconds'])} "
        "wall clock)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
