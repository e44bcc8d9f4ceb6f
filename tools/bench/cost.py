#!/usr/bin/env python3
"""make bench-cost: what one request costs each engine, counted, not timed.

    tools/bench/cost.py [--out DIR] [--scale S] [--engines A,B] [--workloads A,B]
                        [--tools instr,sys,cpu] [--budget SEC]
    tools/bench/cost.py --publish results/<ts>   # copy cost.json, cost.png to docs/bench/

Two counts per engine and workload, each from its own server run:

- instr: user-space instructions per request (program and its libraries;
  the kernel is not counted), the server under valgrind --tool=callgrind;
- sys: system calls per request, the server under strace -f -c (attached
  for each batch, detached after it), by name and with their errors.

- cpu: CPU time per request (small-keepalive, small-close, 1mib): the
  server bare, the client unpaced with 100 connections; the server's
  time from its CPU-time clock, split into user and kernel time in the
  ratio /proc/PID/stat gives (clock ticks), and the client's (its
  rusage), over the N and the 2N batch whole (3N requests; see
  cpu_figures). Not a count, so it moves with the host's load: it runs
  in --cpu-rounds rounds (default 5), the engines alternating and their
  order rotated by one each round, and a figure is the median round (by
  the server's time) with the range of the rounds; the rate beside it is
  the median of the rounds' rates, taken apart from the time's (1 MiB
  rates spread two to one between rounds on one host, so the rate of
  the median-time round says little). It moves far less than
  a request rate: it says where a request's time goes, and the
  best throughput ratio that time allows when client and server keep the
  shared cores busy (a server that polls before it sleeps spends idle
  time too, and can do better where wake-ups, not CPU, bound a run).

The client (build/htstress under SCHED_BATCH, so that it does not
preempt the server on a shared core; for ktcp-echo a paced echo client
in this file) runs outside both tools: only the server is counted. Each count is taken
over two batches on the same warm server, N requests then 2N (callgrind:
counters zeroed before and dumped after each batch with callgrind_control;
strace: attached before and detached after each batch), and

    per request = (count(2N) - count(N)) / N

so what a batch costs once (a keep-alive connection's accept and close,
strace's attach, callgrind's dump) cancels, and fixed = 2 count(N) -
count(2N) is kept as a check. One connection at a time (concurrency 1),
paced by htstress --rate well below what the server does under Valgrind:
every request finds the server idle, so the path (a read that would block,
then the wait in epoll) is the same under callgrind, under strace and
without either, rather than depending on how much a tool slows the server.
Every engine runs one worker (ktcp-httpd --threads 1, nginx with
master_process off, lwan threads = 1, ktcp-echo --threads 1).

Writes <out>/cost.json, cost.md, cost.png and the callgrind dumps; an
engine that crashes or answers wrongly is a result in the table ("crashed",
"error: ..."), never a failure of the harness."""
import argparse
import email.utils
import gzip
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (puts tools/ on sys.path)
import engines as eng  # noqa: E402
from engines import tlscert  # noqa: E402
import plan  # noqa: E402

TOP = eng.TOP
HERE = os.path.dirname(os.path.abspath(__file__))
SHIM_SRC = os.path.join(HERE, "vg-openat2.c")

# name -> what the client asks. n: requests in the first batch (the second
# has 2n); rate: requests per second the client paces to.
WORKLOADS = {
    "small-keepalive": {"path": "/small.txt", "keep_alive": True, "n": 200, "rate": 200,
                        "label": "13-byte file, keep-alive"},
    "small-close": {"path": "/small.txt", "keep_alive": False, "n": 200, "rate": 200,
                    "label": "13-byte file, connection per request (HTTP/1.0)"},
    "1mib": {"path": "/big.bin", "keep_alive": True, "n": 20, "rate": 20,
             "label": "1 MiB file, keep-alive"},
    "304": {"path": "/small.txt", "keep_alive": True, "n": 200, "rate": 200,
            "conditional": True, "label": "304 Not Modified (If-None-Match), keep-alive"},
    "gzip": {"path": "/page.html", "keep_alive": True, "n": 200, "rate": 200,
             "headers": ["Accept-Encoding: gzip"],
             "label": "cached gzip: 64 KiB HTML, Accept-Encoding: gzip, keep-alive"},
    "echo": {"n": 200, "rate": 200, "size": 64, "label": "echo round trip, 64 bytes"},
    # over TLS 1.3 (AES-128-GCM, X25519), records written by OpenSSL (the
    # host has no kTLS), against nginx with its own OpenSSL records
    "https-keepalive": {"path": "/small.txt", "keep_alive": True, "tls": True, "n": 200,
                        "rate": 200, "label": "13-byte file over TLS 1.3, keep-alive"},
    "https-handshake": {"path": "/small.txt", "keep_alive": False, "tls": True, "n": 40,
                        "rate": 20, "label": "13-byte file on a new TLS 1.3 connection "
                                             "(full handshake, X25519)"},
}
HTTP_ORDER = ["small-keepalive", "small-close", "1mib", "304", "gzip"]
HTTPS_ORDER = ["https-keepalive", "https-handshake"]
ALL_ORDER = HTTP_ORDER + HTTPS_ORDER + ["echo"]
ENGINE_ORDER = ["ktcp-httpd-threads", "ktcp-httpd-epoll", "ktcp-httpd-mn", "nginx", "lwan",
                "floor", "ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls", "nginx-tls", "ktcp-echo"]
FLOOR = "floor"  # tools/floor.c: the least a server can do (its workloads only)
TOOLS = ("instr", "sys", "cpu")
WARMUP = 20  # requests before the batches: caches filled, first-use paths taken
TOP_FUNCTIONS = 15


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------- clients

def http_batch(port, wl, n, headers, conc=1, paced=True):
    """htstress, n requests on one connection (or n connections), paced
    (or conc connections at once, as fast as the server answers: paced
    False); returns (raw JSON, None) or (raw or None, why the batch is not
    clean)."""
    w = WORKLOADS[wl]
    argv = [os.path.join(eng.BUILD, "htstress"), "-n", str(n), "-c", str(conc), "-t", "1",
            "--timeout", "20000", "--json", "--sched-batch"] + (["-r", str(w["rate"])] if paced else [])
    if w["keep_alive"]:
        argv.append("-k")
    for h in w.get("headers", []) + headers:
        argv += ["-H", h]
    if w.get("tls"):
        argv += ["--tls-version", "1.3"]
    argv.append(f"{'https' if w.get('tls') else 'http'}://127.0.0.1:{port}{w['path']}")
    raw, err, _ = bench.run_tool(argv, (n / w["rate"] if paced else 0) + 60)
    if raw is None:
        return None, f"htstress: {err}"
    want = "3xx" if w.get("conditional") else "2xx"
    if raw["good"] != n or raw["status"][want] != n or raw["errors"]["total"]:
        errs = ", ".join(f"{v} {k}" for k, v in raw["errors"].items() if v and k != "total")
        return raw, (f"htstress: of {raw['requests']} requests {raw['status'][want]} answered "
                     f"{want} (want {n}), {raw['bad']} bad" + (f", errors: {errs}" if errs else ""))
    return raw, None


def echo_batch(port, n, rate, size, timeout_s=20.0):
    """n round trips of size bytes on one connection, one every 1/rate s,
    each echo checked byte for byte."""
    msg = bytes((i * 7 + 1) % 256 for i in range(size))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = last = time.monotonic()
            for i in range(n):
                # on schedule, and never straight after the last echo: a
                # client that fell behind and caught up would find the
                # server still awake and count fewer waits per message
                delay = max(t0 + i / rate, last + 0.5 / rate) - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                s.sendall(msg)
                got = b""
                while len(got) < size:
                    b = s.recv(size - len(got))
                    if not b:
                        return {"round_trips": i}, f"closed after {i} of {n} round trips"
                    got += b
                if got != msg:
                    return {"round_trips": i}, f"echo {i} differs from what was sent"
                last = time.monotonic()
    except OSError as ex:
        return None, f"echo client: {ex}"
    return {"round_trips": n, "bytes_read": n * size}, None


# ---------------------------------------------------------------- probes

class Probe(Exception):
    pass


def http_get(port, path, headers):
    ctx = tlscert.context_for(port)
    c = (http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=ctx) if ctx
         else http.client.HTTPConnection("127.0.0.1", port, timeout=20))
    try:
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def probe(port, wl, docroot):
    """Checks the engine answers the workload correctly; returns the extra
    request headers its batches send and a note (or None), raises Probe."""
    w = WORKLOADS[wl]
    if wl == "echo":
        _, err = echo_batch(port, 1, 1000, w["size"])
        if err:
            raise Probe(err)
        return [], None
    hdrs = dict(h.split(": ", 1) for h in w.get("headers", []))
    try:
        status, head, body = http_get(port, w["path"], hdrs)
    except (OSError, http.client.HTTPException) as ex:
        raise Probe(f"GET {w['path']}: {type(ex).__name__}: {ex}")
    want = open(os.path.join(docroot, w["path"].lstrip("/")), "rb").read()
    if status != 200:
        raise Probe(f"GET {w['path']}: status {status}")
    if wl == "gzip":
        if head.get("content-encoding") != "gzip":
            raise Probe(f"GET {w['path']} with Accept-Encoding: gzip answered Content-Encoding "
                        f"{head.get('content-encoding')}")
        body = gzip.decompress(body)
    if body != want:
        raise Probe(f"GET {w['path']}: body differs from the file")
    if not w.get("conditional"):
        return [], None
    note = None
    if head.get("etag"):
        cond = f"If-None-Match: {head['etag']}"
    else:
        lm = head.get("last-modified") or email.utils.formatdate(
            os.stat(os.path.join(docroot, w["path"].lstrip("/"))).st_mtime, usegmt=True)
        cond = f"If-Modified-Since: {lm}"
        note = "no ETag: If-Modified-Since instead"
    k = cond.split(":", 1)[0]
    raw = raw_exchange(port, f"GET {w['path']} HTTP/1.1\r\nHost: 127.0.0.1\r\n{cond}\r\n"
                             "Connection: close\r\n\r\n")
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode(errors="replace") if b" " in head else "?"
    if status != "304":
        raise Probe(f"{k} with the validator it sent: status {status}, not 304")
    if rest:
        # a keep-alive client reads these bytes as the start of the next answer
        raise Probe(f"its 304 carries a {len(rest):,}-byte body (a 304 has none)"
                    + (f"; {note}" if note else ""))
    return [cond], note


def raw_exchange(port, request, timeout_s=20.0):
    """The request as bytes, and everything the server sends until it closes."""
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(request.encode())
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
    except OSError as ex:
        raise Probe(f"{request.split(chr(13))[0]}: {type(ex).__name__}: {ex}")
    return data


# ---------------------------------------------------------------- counters

def callgrind_control(cmd, pid):
    r = subprocess.run(["callgrind_control", cmd, str(pid)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode or "OK" not in r.stdout:
        raise RuntimeError(f"callgrind_control {cmd} {pid}: {(r.stdout + r.stderr).strip()}")


def callgrind_total(path):
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals line")


class Callgrind:
    """The server under valgrind --tool=callgrind; a batch is counted
    between a zero and a dump."""
    name = "instr"

    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = os.path.join(ctx.out, "callgrind")
        os.makedirs(self.dir, exist_ok=True)
        self.shim = os.path.join(ctx.tmp, "vg-openat2.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", self.shim, SHIM_SRC, "-ldl"],
                       check=True, timeout=120)

    def unavailable(self):
        for t in ("valgrind", "callgrind_control", "callgrind_annotate"):
            if not shutil.which(t):
                return f"{t} not installed (scripts/deps installs valgrind)"
        return None

    def wrap(self, engine, argv):
        env = dict(os.environ)
        if isinstance(engine, eng.UserHttpd):
            env["LD_PRELOAD"] = self.shim  # openat2, see vg-openat2.c
        return ["valgrind", "--tool=callgrind", "--dump-instr=no",
                f"--callgrind-out-file={self.dir}/{engine.name}.%p"] + argv, env

    def batch(self, engine, client, tag):
        pid = engine.proc.pid
        before = set(os.listdir(self.dir))
        callgrind_control("-z", pid)
        res, err = client()
        callgrind_control("-d", pid)
        end = time.monotonic() + 10
        while True:
            new = sorted(f for f in set(os.listdir(self.dir)) - before
                         if f.startswith(f"{engine.name}.{pid}"))
            if new or time.monotonic() > end:
                break
            time.sleep(0.1)
        if not new:
            raise RuntimeError(f"callgrind wrote no dump for {engine.name} ({tag})")
        path = os.path.join(self.dir, new[-1])
        dest = os.path.join(self.dir, f"{engine.name}.{tag}.out")
        os.replace(path, dest)
        return {"total": callgrind_total(dest), "file": dest}, res, err


STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+\s+)?(\w+)\s*$")


def parse_strace(path):
    calls, errors = {}, {}
    with open(path) as f:
        for line in f:
            m = STRACE_ROW.match(line)
            if m and m.group(3) != "total":
                calls[m.group(3)] = calls.get(m.group(3), 0) + int(m.group(1))
                if m.group(2):
                    errors[m.group(3)] = errors.get(m.group(3), 0) + int(m.group(2))
    return calls, errors


def traced_by(pid, tracer):
    """Is every thread of pid traced by tracer?"""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                st = f.read()
        except OSError:
            continue  # the thread ended
        m = re.search(r"^TracerPid:\s*(\d+)", st, re.M)
        if not m or int(m.group(1)) != tracer:
            return False
    return True


class Strace:
    """The server runs bare; strace -f -c attaches to all its threads for a
    batch and detaches after it."""
    name = "sys"

    def __init__(self, ctx):
        self.ctx = ctx
        self.dir = os.path.join(ctx.out, "strace")
        os.makedirs(self.dir, exist_ok=True)

    def unavailable(self):
        return None if shutil.which("strace") else "strace not installed (scripts/deps)"

    wrap = None

    def batch(self, engine, client, tag):
        path = os.path.join(self.dir, f"{engine.name}.{tag}.txt")
        p = subprocess.Popen(["strace", "-f", "-c", "-o", path, "-p", str(engine.proc.pid)],
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            buf, end = "", time.monotonic() + 20
            while "attached" not in buf:
                left = end - time.monotonic()
                if left <= 0 or p.poll() is not None:
                    raise RuntimeError(f"strace did not attach: {buf.strip()[-200:]}")
                if select.select([p.stderr], [], [], left)[0]:
                    buf += os.read(p.stderr.fileno(), 4096).decode(errors="replace")
            # "attached" comes before strace has seized every thread: wait
            # until each of the server's threads names strace as its tracer,
            # or the first requests of the batch go uncounted
            while not traced_by(engine.proc.pid, p.pid):
                if time.monotonic() > end or p.poll() is not None:
                    raise RuntimeError("strace did not attach to every thread")
                time.sleep(0.01)
            time.sleep(0.05)  # the server back in its wait
            res, err = client()
        finally:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        calls, errors = parse_strace(path)
        return {"total": sum(calls.values()), "calls": calls, "errors": errors,
                "file": path}, res, err


def proc_cpu_us(pid):
    """CPU time of every thread of pid so far, in microseconds: the total
    from the process's CPU-time clock (exact), and utime, stime from
    /proc/PID/stat (in clock ticks, 10 ms: only their ratio is used)."""
    total = time.clock_gettime(((~pid) << 3) | 2) * 1e6  # CPUCLOCK_SCHED of pid
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return total, int(fields[11]), int(fields[12])


class Cpu:
    """The server runs bare and the client at full speed with CPU_CONC
    connections: CPU time per request, the server's in user space and in
    the kernel (its /proc/PID/stat) and the client's (its rusage). On two
    cores shared by client and server a throughput run is bound by their
    sum, so it says what a throughput ratio can be at best, and what share
    of it is the server's own code."""
    name = "cpu"
    wrap = None
    conc = 100
    paced = False
    workloads = {"small-keepalive": 100_000, "small-close": 20_000, "1mib": 5_000}
    # 1 MiB as the throughput bench measures it: 10 connections
    conc_of = {"1mib": 10}

    def __init__(self, ctx):
        self.ctx = ctx

    def unavailable(self):
        return None

    def batch(self, engine, client, tag):
        pid = engine.proc.pid
        t0, u0, s0 = proc_cpu_us(pid)
        c0 = os.times()
        w0 = time.monotonic()
        res, err = client()
        wall = time.monotonic() - w0
        c1 = os.times()
        t1, u1, s1 = proc_cpu_us(pid)
        cu = (c1.children_user + c1.children_system - c0.children_user
              - c0.children_system) * 1e6
        return {"total": t1 - t0, "user_ticks": u1 - u0, "kernel_ticks": s1 - s0,
                "client": cu, "wall": wall}, res, err


def cpu_figures(a, b, n):
    """CPU time per request from the N and the 2N batch of the cpu tool:
    both batches whole, over their 3N requests. Not their difference, as
    the counts are taken: a time moves with the host's load, and two
    batches on a busy host can differ by more than N requests cost (the
    2N batch has been measured below the N batch), which a difference
    turns into a negative time. What a batch costs once is small here: the
    server is warm, and 100 connections' set-up is a fraction of a percent
    of N requests. The server's time is split into user and kernel time in
    the ratio of their clock ticks over both batches."""
    whole = 3 * n
    per = (a["total"] + b["total"]) / whole
    ut = a["user_ticks"] + b["user_ticks"]
    kt = a["kernel_ticks"] + b["kernel_ticks"]
    user = per * ut / max(1, ut + kt)
    return {"per_request": per, "user": user, "kernel": per - user,
            "client": (a["client"] + b["client"]) / whole, "fixed": None,
            "method": "both batches whole, over 3N"}


def merge_cpu_rounds(recs):
    """The cpu tool's rounds of one engine and workload as one record: the
    median round by the server's time a request (of an even number, the
    lower middle), with every round's server time and rate and the
    largest distance of a round from the median (% of it). The rate is
    the median of the rounds' rates on its own (and its spread), not the
    rate of the median-time round. A round that failed is listed; with
    none ok, the first round's record stands."""
    ok = sorted((r for r in recs if r.get("status") == "ok"),
                key=lambda r: r["per_request"])
    if not ok:
        return recs[0]
    m = dict(ok[(len(ok) - 1) // 2])
    med = m["per_request"]
    m["rounds"] = [round(r["per_request"], 2) for r in ok]
    m["rounds_rps"] = [round(r["requests_per_s"], 1) for r in ok]
    m["spread_pct"] = round(max(abs(r["per_request"] - med) for r in ok) / med * 100, 1) \
        if med > 0 else 0.0
    rates = sorted(r["requests_per_s"] for r in ok)
    m["requests_per_s"] = rates[(len(rates) - 1) // 2]
    m["rps_spread_pct"] = round(max(abs(r - m["requests_per_s"]) for r in rates)
                                / m["requests_per_s"] * 100, 1) if m["requests_per_s"] > 0 else 0.0
    m["rounds_failed"] = [r.get("reason", r.get("status")) for r in recs
                          if r.get("status") != "ok"]
    return m


# ---------------------------------------------------------------- annotate

def function_costs(path, with_files=False):
    """({function (where): self Ir}, {function (where): inclusive Ir}) for
    one callgrind dump, read from the file itself. Each cost line belongs
    to the function of the last fn= line; the line after calls= is the
    call's inclusive cost, which counts towards the caller's inclusive cost
    (a function calling itself excepted) and not towards its self cost, so
    the self costs add up to the dump's total. where = the source file for
    the repository's binaries, the object's name for the rest. (Valgrind
    3.19's callgrind_annotate lists per file:function, and its list for
    these dumps adds up to more than the total, so it is not used for the
    sums; it reads the same dumps for a look by hand.) Inclusive costs rest
    on callgrind's call tracking, which a coroutine switch can mislead."""
    names = {"fn": {}, "fl": {}, "ob": {}}
    space = {"fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
             "cfl": "fl", "ob": "ob", "cob": "ob"}
    cur = {"fn": "?", "fl": "?", "ob": "?", "cfn": None}
    src = "?"  # the file of the cost lines: fi=/fe= (inlined code), else fl=
    selfc, callc, skip = {}, {}, False
    filec = {}
    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                key = (cur["fn"], cur["fl"], cur["ob"])
                if skip:
                    skip = False
                    if len(parts) >= 2 and cur["cfn"] != cur["fn"]:
                        callc[key] = callc.get(key, 0) + int(parts[1])
                    continue
                if len(parts) >= 2:
                    selfc[key] = selfc.get(key, 0) + int(parts[1])
                    fkey = (cur["fn"], src, cur["ob"])
                    filec[fkey] = filec.get(fkey, 0) + int(parts[1])
                continue
            k, eq, v = line.rstrip("\n").partition("=")
            if not eq:
                continue
            if k == "calls":
                skip = True
                continue
            if k not in space:
                continue
            m = re.match(r"^\((\d+)\)(?: (.*))?$", v)
            ns = names[space[k]]
            if m:
                if m.group(2) is not None:
                    ns[m.group(1)] = m.group(2)
                v = ns.get(m.group(1), "?")
            if k in cur:
                cur[k] = v
            if k in ("fl", "fn"):
                src = cur["fl"]
            elif k in ("fi", "fe"):
                src = v

    def keyed(costs):
        out = {}
        for (fn, fl, ob), ir in costs.items():
            mine = ob.startswith(TOP + "/")
            where = (os.path.relpath(fl, TOP) if fl.startswith("/") else fl) if mine \
                else os.path.basename(ob)
            key = f"{fn} ({where})"
            out[key] = out.get(key, 0) + ir
        return out

    s, c = keyed(selfc), keyed(callc)
    if with_files:
        out = {}
        for key, ir in keyed(filec).items():
            where = key[key.rfind(" (") + 2:-1]
            out[where] = out.get(where, 0) + ir
        return out
    return s, {k: s.get(k, 0) + c.get(k, 0) for k in set(s) | set(c)}


def file_costs(path):
    """{source file: self Ir} for one dump, by the file each instruction
    was compiled from (fi=/fe= lines), inlined or not: link-time
    optimisation inlines core's parser into the engine's connection loop,
    and its cost stays under core/http_parser.c here. Objects outside the
    repository by name."""
    return function_costs(path, with_files=True)


def per_request_files(a_path, b_path, n, top=TOP_FUNCTIONS):
    """The source files (objects, outside the repository) with the most
    instructions per request."""
    a, b = file_costs(a_path), file_costs(b_path)
    d = {f: (b.get(f, 0) - a.get(f, 0)) / n for f in set(a) | set(b)}
    best = sorted(d.items(), key=lambda kv: -kv[1])[:top]
    return [{"file": f, "ir_per_request": round(v, 1)} for f, v in best if v > 0]


def self_costs(path):
    return function_costs(path)[0]


def per_request_functions(a_path, b_path, n, top=TOP_FUNCTIONS):
    """The functions with the most instructions per request, self and
    inclusive: (dump over 2N - dump over N) / N, as the totals."""
    (sa, ia), (sb, ib) = function_costs(a_path), function_costs(b_path)

    def diff(a, b, k):
        d = {f: (b.get(f, 0) - a.get(f, 0)) / n for f in set(a) | set(b)}
        best = sorted(d.items(), key=lambda kv: -kv[1])[:k]
        return [{"function": f, "ir_per_request": round(v, 1)} for f, v in best if v > 0]

    return {"self": diff(sa, sb, top), "inclusive": diff(ia, ib, top + 5),
            "self_total": round((sum(sb.values()) - sum(sa.values())) / n, 1)}


# ---------------------------------------------------------------- runner

def engines_for(names):
    all_ = [eng.UserHttpd(m) for m in eng.HTTPD_MODELS] + [eng.Nginx(), eng.Lwan(), eng.Floor(),
                                                            eng.UserEcho()]
    tls = [eng.UserHttpd(m, tls=True) for m in ("epoll", "mn")] + [eng.Nginx(tls="user")]
    for e in tls:
        e.workloads = HTTPS_ORDER
    return [e for e in all_ + tls if names is None or e.name in names]


def workloads_of(e, wanted):
    wls = ["echo"] if e.proto == "echo" else list(getattr(e, "workloads", HTTP_ORDER))
    return [w for w in wls if wanted is None or w in wanted]


def batch_sizes(wl, scale):
    return max(2, int(round(WORKLOADS[wl]["n"] * scale)))


def measure(e, tool, wls, ctx, deadline, results):
    """Every workload of engine e under one tool, into results[(e, wl)][tool]."""
    ctx.wrap = tool.wrap
    ctx.start_timeout_s = 90.0 if tool.wrap else 15.0
    start_err = None
    for wl in wls:
        rec = results.setdefault((e.name, wl), {})
        if time.monotonic() > deadline:
            rec[tool.name] = {"status": "skipped", "reason": "over the time budget"}
            continue
        if start_err:
            rec[tool.name] = {"status": "error", "reason": start_err}
            continue
        if e.proc is None:
            try:
                bench.start_engine(e, eng.free_port(), ctx)
            except Exception as ex:  # noqa: BLE001 - the engine's result, not the harness's
                start_err = f"did not start: {ex}"
                rec[tool.name] = {"status": "error", "reason": start_err}
                continue
        cpu_n = getattr(tool, "workloads", None)
        if cpu_n is not None and wl not in cpu_n:
            rec[tool.name] = {"status": "skipped",
                              "reason": "cpu is measured on " + ", ".join(cpu_n)}
            continue
        n = (max(2, int(round(cpu_n[wl] * ctx.scale))) if cpu_n
             else batch_sizes(wl, ctx.scale))
        w = WORKLOADS[wl]
        conc = getattr(tool, "conc_of", {}).get(wl, getattr(tool, "conc", 1))
        t0 = time.monotonic()
        out = {"n": n, "status": "ok"}
        try:
            headers, note = probe(e.port, wl, ctx.docroot)
            if note:
                out["note"] = note
            if wl == "echo":
                def client(k):
                    return lambda: echo_batch(e.port, k, w["rate"], w["size"])
            else:
                def client(k):
                    return lambda: http_batch(e.port, wl, k, headers,
                                              conc=conc,
                                              paced=getattr(tool, "paced", True))
            _, err = client(min(WARMUP, n))()
            if err:
                raise Probe(f"warm-up: {err}")
            a, ra, err = tool.batch(e, client(n), f"{wl}.n")
            if err:
                raise Probe(err)
            b, rb, err = tool.batch(e, client(2 * n), f"{wl}.2n")
            if err:
                raise Probe(err)
            out["a"], out["b"] = a["total"], b["total"]
            out["per_request"] = (b["total"] - a["total"]) / n
            out["fixed"] = 2 * a["total"] - b["total"]
            if ctx.linearity:
                # a third batch of 3N: its increment over 2N is N requests again
                c, _, err = tool.batch(e, client(3 * n), f"{wl}.3n")
                if err:
                    raise Probe(err)
                out["c"] = c["total"]
                out["per_request_3n"] = (c["total"] - b["total"]) / n
                if tool.name == "sys":
                    out["by_name_3n"] = {
                        k: (c["calls"].get(k, 0) - b["calls"].get(k, 0)) / n
                        for k in sorted(set(b["calls"]) | set(c["calls"]))}
                    out["errors_per_request_3n"] = {
                        k: (c["errors"].get(k, 0) - b["errors"].get(k, 0)) / n
                        for k in sorted(set(b["errors"]) | set(c["errors"]))}
            if rb and rb.get("good"):
                out["bytes_per_response"] = rb["bytes_read"] / rb["good"]
            if tool.name == "cpu":
                out.update(cpu_figures(a, b, n))
                out["requests_per_s"] = (rb or {}).get("good", 2 * n) / b["wall"]
                out["concurrency"] = conc
            if tool.name == "sys":
                names = set(a["calls"]) | set(b["calls"])
                out["by_name"] = {k: (b["calls"].get(k, 0) - a["calls"].get(k, 0)) / n
                                  for k in sorted(names)}
                out["errors_per_request"] = {
                    k: (b["errors"].get(k, 0) - a["errors"].get(k, 0)) / n
                    for k in sorted(set(a["errors"]) | set(b["errors"]))}
            elif tool.name == "instr" and wl in ctx.annotate:
                fns = per_request_functions(a["file"], b["file"], n)
                out["functions"] = fns["self"]
                out["functions_inclusive"] = fns["inclusive"]
                out["functions_total"] = fns["self_total"]
                out["files"] = per_request_files(a["file"], b["file"], n)
        except Probe as ex:
            out = {"n": n, "status": "error", "reason": str(ex)}
        except Exception as ex:  # noqa: BLE001 - whatever went wrong is this cell's result
            out = {"n": n, "status": "error", "reason": f"{type(ex).__name__}: {ex}"}
        died = e.died()
        if died:
            tail = e.log_tail(300).replace("\n", " | ")
            out = {"n": n, "status": "crashed",
                   "reason": f"{died}" + (f"; log: {tail}" if tail else "")}
            e.proc = None  # the next workload starts it anew
        out["seconds"] = round(time.monotonic() - t0, 2)
        rec[tool.name] = out
        if out["status"] != "ok":
            fig = f"{out['status']}: {out.get('reason', '')[:160]}"
        elif tool.name == "cpu":
            fig = (f"{out['per_request']:.1f} us/req (user {out['user']:.1f}, kernel "
                   f"{out['kernel']:.1f}; client {out['client']:.1f})")
        else:
            fig = f"{out['per_request']:,.1f}/req (fixed {out['fixed']:,})"
        log(f"bench-cost: {tool.name:5s} {e.name:18s} {wl:15s} n={n}: {fig} "
            f"[{out['seconds']:.1f} s]")
    e.stop(check=False)


def versions():
    v = {}
    for name, argv in (("valgrind", ["valgrind", "--version"]),
                       ("strace", ["strace", "-V"]),
                       ("nginx", ["nginx", "-v"])):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                               env=dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin"))
            v[name] = (r.stdout + r.stderr).strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired, IndexError):
            v[name] = None
    p = eng.lwan_path()
    if p and os.access(p, os.X_OK):
        try:
            r = subprocess.run([p, "--version"], capture_output=True, text=True, timeout=10)
            v["lwan"] = next((ln for ln in r.stdout.splitlines() if "version" in ln.lower()),
                             r.stdout.strip()[:80])
        except (OSError, subprocess.TimeoutExpired):
            v["lwan"] = None
        v["lwan_path"] = p
    return v


def run(args):
    out = args.out or os.path.join(TOP, "results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    ctx = bench.Ctx()
    ctx.out = out
    ctx.tmp = tempfile.mkdtemp(prefix="ktcp-cost-")
    ctx.docroot = os.path.join(ctx.tmp, "www")
    bench.make_docroot(ctx.docroot)
    # cached gzip: a pre-compressed copy beside the page, newer and smaller,
    # for nginx (gzip_static) and lwan (serve precompressed files);
    # ktcp-httpd compresses once into its content cache.
    page = os.path.join(ctx.docroot, "page.html")
    with open(page, "rb") as f, gzip.open(page + ".gz", "wb", compresslevel=6) as g:
        g.write(f.read())
    ctx.workers = 1
    ctx.gzip_static = True
    ctx.scale = args.scale
    ctx.annotate = set(args.annotate.split(",")) if args.annotate else set()
    ctx.linearity = args.linearity
    eng.raise_nofile()

    wanted_e = set(args.engines.split(",")) if args.engines else None
    wanted_w = set(args.workloads.split(",")) if args.workloads else None
    tools = [{"instr": Callgrind, "sys": Strace, "cpu": Cpu}[t](ctx)
             for t in args.tools.split(",")]
    t_start = time.monotonic()
    deadline = t_start + args.budget
    cond = bench.conditions("host")
    cond.update({"versions": versions(), "git": git_describe(), "concurrency": 1,
                 "workers": 1, "scale": args.scale,
                 "command": " ".join(["tools/bench/cost.py"] + sys.argv[1:])})
    results, skipped = {}, []
    engines = engines_for(wanted_e)
    cond["cpu_rounds"] = args.cpu_rounds
    log(f"bench-cost: {len(engines)} engines x {', '.join(t.name for t in tools)}; "
        f"results in {os.path.relpath(out, os.getcwd())}; budget {args.budget:.0f} s")
    live = []
    for e in engines:
        why = e.unavailable()
        if why:
            skipped.append({"engine": e.name, "reason": why})
            log(f"bench-cost: {e.name}: skipped: {why}")
            continue
        live.append(e)
        for tool in tools:
            if tool.name == "cpu":
                continue  # in rounds, below
            why = tool.unavailable()
            if why:
                for wl in workloads_of(e, wanted_w):
                    results.setdefault((e.name, wl), {})[tool.name] = {"status": "skipped",
                                                                       "reason": why}
                continue
            try:
                measure(e, tool, workloads_of(e, wanted_w), ctx, deadline, results)
            finally:
                e.stop(check=False)
    cpu = next((t for t in tools if t.name == "cpu"), None)
    if cpu and live:
        # a time, unlike a count, moves with the host: the engines
        # alternate, the order rotated by one each round, as make bench's
        per_round = []
        for r in range(max(1, args.cpu_rounds)):
            order = live[r % len(live):] + live[:r % len(live)]
            got = {}
            for e in order:
                try:
                    measure(e, cpu, workloads_of(e, wanted_w), ctx, deadline, got)
                finally:
                    e.stop(check=False)
            per_round.append(got)
        for key in {k for g in per_round for k in g}:
            results.setdefault(key, {})["cpu"] = merge_cpu_rounds(
                [g[key]["cpu"] for g in per_round if key in g])
    cond["loadavg_end"] = bench.loadavg()
    cond["seconds"] = round(time.monotonic() - t_start, 1)
    rows = []
    for (name, wl), rec in results.items():
        rows.append({"engine": name, "workload": wl, "label": WORKLOADS[wl]["label"],
                     "rate": WORKLOADS[wl]["rate"], **{t: rec.get(t) for t in TOOLS}})
    rows.sort(key=lambda r: (ENGINE_ORDER.index(r["engine"]),
                             ALL_ORDER.index(r["workload"])))
    doc = {"conditions": cond, "method": METHOD, "rows": rows, "skipped": skipped}
    with open(os.path.join(out, "cost.json"), "w") as f:
        json.dump(doc, f, indent=1)
    write_report(out, doc)
    subprocess.run(["rm", "-rf", ctx.tmp], timeout=60)
    log(f"bench-cost: done in {cond['seconds']:.0f} s: {os.path.relpath(out, os.getcwd())}/"
        "cost.md")
    return doc


def git_describe():
    try:
        return subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None


METHOD = ("per request = (count over 2N requests - count over N requests) / N, both batches "
          "on one warm server, one connection, paced by the client so that each request finds "
          "the server idle; instr = user-space instructions (valgrind --tool=callgrind, Ir), "
          "sys = system calls (strace -f -c attached for each batch), each from its own run")


# ---------------------------------------------------------------- report

def fmt_n(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


PEER = "nginx"  # every HTTP figure also as a ratio to nginx's, same run


def peer_of(wl):
    """The engine a workload's figures are compared with: nginx, over TLS
    for the TLS workloads."""
    return PEER + "-tls" if WORKLOADS[wl].get("tls") else PEER


def cell_text(m, width=70, peer=None):
    if m is None:
        return "-"
    if m.get("status") == "ok":
        s = fmt_n(m["per_request"])
        if peer and peer.get("status") == "ok" and peer["per_request"] > 0:
            s += f" (×{m['per_request'] / peer['per_request']:.2f})"
        return s + (" †" if m.get("note") else "")
    if m.get("status") in ("crashed", "skipped"):
        return m["status"]
    why = " ".join(str(m.get("reason", "")).split()).replace("|", "/")
    return "error: " + (why[:width - 1] + "…" if len(why) > width else why)


def table(doc, tool, title, workloads=None):
    rows = doc["rows"]
    engines = [e for e in ENGINE_ORDER if any(r["engine"] == e and r["workload"]
                                                in (workloads or ALL_ORDER)
                                                for r in rows)]
    wls = [w for w in workloads or ALL_ORDER
           if any(r["workload"] == w for r in rows)]
    L = [f"### {title}", "",
         "| engine | " + " | ".join(wls) + " |", "|---|" + "---|" * len(wls)]
    for e in engines:
        cells = []
        for w in wls:
            r = next((r for r in rows if r["engine"] == e and r["workload"] == w), None)
            p = next((r for r in rows if r["engine"] == peer_of(w) and r["workload"] == w),
                     None)
            peer = p.get(tool) if p and e != peer_of(w) else None
            cells.append(cell_text(r.get(tool), peer=peer) if r else "")
        L.append(f"| {e} | " + " | ".join(cells) + " |")
    return L


def cpu_split(doc):
    """The cpu tool's rows: where a request's CPU time goes, and the
    throughput ratio to nginx that time allows when client and server
    share the cores (nginx's sum over the engine's)."""
    rows = [r for r in doc["rows"] if (r.get("cpu") or {}).get("status") == "ok"]
    if not rows:
        return []
    # the floor's columns only when the run measured the floor
    has_floor = any(r["engine"] == FLOOR for r in rows)
    rounds = max((len(r["cpu"].get("rounds", [1])) for r in rows), default=1)
    L = ["#### CPU time per request, microseconds (unpaced; /proc/PID/stat and the "
         "client's rusage" + (f"; the median of {rounds} alternating rounds ± the largest "
                              "distance of a round's server time from it; the rate the median of the rounds' "
                              "rates on its own" if rounds > 1 else "")
         + ")",
         "| engine | workload | connections | server user | server kernel | client | sum | "
         "× nginx's sum (best throughput ratio if CPU-bound) | "
         + ("server CPU × floor's | " if has_floor else "") + "req/s |"
         + (" req/s × floor's |" if has_floor else ""),
         "|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|" * (3 if has_floor else 1))]
    for r in rows:
        c = r["cpu"]
        total = c["user"] + c["kernel"] + c["client"]
        p = next((x["cpu"] for x in rows
                  if x["engine"] == PEER and x["workload"] == r["workload"]), None)
        ratio = (f"×{(p['user'] + p['kernel'] + p['client']) / total:.2f}"
                 if p and total > 0 and r["engine"] != PEER else "")
        f = next((x["cpu"] for x in rows
                  if x["engine"] == FLOOR and x["workload"] == r["workload"]), None)
        fcpu = fput = ""
        if f and r["engine"] != FLOOR and f["per_request"] > 0 and f["requests_per_s"] > 0:
            fcpu = f"×{c['per_request'] / f['per_request']:.2f}"
            fput = f"×{c['requests_per_s'] / f['requests_per_s']:.2f}"
        many = c.get("rounds") and len(c["rounds"]) > 1
        spread = f" ±{c['spread_pct']:.0f}%" if many else ""
        rspread = f" ±{c['rps_spread_pct']:.0f}%" if many and "rps_spread_pct" in c else ""
        L.append(f"| {r['engine']} | {r['workload']} | {c.get('concurrency', '')} | "
                 f"{c['user']:.1f} | {c['kernel']:.1f}{spread} | "
                 f"{c['client']:.1f} | {total:.1f} | {ratio} | "
                 + (f"{fcpu} | " if has_floor else "") + f"{c['requests_per_s']:,.0f}{rspread} |"
                 + (f" {fput} |" if has_floor else ""))
    return L + [""]


def cond_text(c):
    return (f"kernel {c['kernel']}, {c['cores']} cores ({c['cpu']}), load average "
            f"{c['loadavg_start']} → {c.get('loadavg_end', '?')}; one connection, one server "
            f"worker; {c['versions'].get('valgrind')}, {c['versions'].get('strace')}, "
            f"{c['versions'].get('nginx')}"
            + (f", {c['versions']['lwan']}" if c["versions"].get("lwan") else "")
            + f"; git {c.get('git')}; {c['date']}")


def write_report(out, doc):
    c = doc["conditions"]
    L = ["# ktcp bench-cost", "", cond_text(c), "",
         f"Method: {doc['method']}.", "",
         "Batches (N; the second batch is 2N) and pacing: " + "; ".join(
             f"{w} N={batch_sizes(w, c['scale'])} at {WORKLOADS[w]['rate']}/s"
             for w in ALL_ORDER) + ".", ""]
    L += table(doc, "instr", "User-space instructions per request (callgrind Ir; × nginx)") + [""]
    L += table(doc, "sys", "System calls per request (strace -f -c; × nginx)") + [""]
    L += cpu_split(doc)
    notes = [(r["engine"], r["workload"], t, r[t]["note"]) for r in doc["rows"] for t in TOOLS
             if r.get(t) and r[t].get("note")]
    if notes:
        L += ["† " + "; ".join(sorted({f"{e} {w}: {n}" for e, w, _, n in notes})), ""]
    # system calls by name, keep-alive
    L += ["### System calls per keep-alive request, by name (errors in parentheses)", ""]
    for r in doc["rows"]:
        s = r.get("sys")
        if (r["workload"] in ("small-keepalive", "https-keepalive", "echo") and s
                and s.get("status") == "ok"):
            parts = [f"{k} {v:.2f}" + (f" ({s['errors_per_request'][k]:.2f})"
                                       if s["errors_per_request"].get(k) else "")
                     for k, v in sorted(s["by_name"].items(), key=lambda kv: -kv[1])
                     if abs(v) >= 0.005]
            L.append(f"- {r['engine']} ({r['workload']}): " + ", ".join(parts))
    L.append("")
    for r in doc["rows"]:
        m = r.get("instr")
        if m and m.get("functions"):
            L += [f"### {r['engine']}: instructions per {r['workload']} request, by function "
                  f"(self)", "", "| Ir per request | function |", "|---:|---|"]
            L += [f"| {f['ir_per_request']:,.0f} | `{f['function']}` |" for f in m["functions"]]
            L.append("")
        if m and m.get("files"):
            L += [f"### {r['engine']}: instructions per {r['workload']} request, by source "
                  f"file (self, inlined code under its own file)", "",
                  "| Ir per request | file |", "|---:|---|"]
            L += [f"| {f['ir_per_request']:,.0f} | `{f['file']}` |" for f in m["files"]]
            L.append("")
    bad = [(r["engine"], r["workload"], t, r[t]) for r in doc["rows"] for t in TOOLS
           if r.get(t) and r[t].get("status") != "ok"]
    if bad or doc["skipped"]:
        L += ["### Not measured", ""]
        L += [f"- {s['engine']}: skipped: {s['reason']}" for s in doc["skipped"]]
        L += [f"- {e} {w} ({t}): {m['status']}: {m.get('reason', '')}" for e, w, t, m in bad]
        L.append("")
    L += ["![cost per request](cost.png)", ""]
    with open(os.path.join(out, "cost.md"), "w") as f:
        f.write("\n".join(L))
    plot(out, doc)


def plot(out, doc):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import report
    rows = doc["rows"]
    engines = [e for e in ENGINE_ORDER if any(r["engine"] == e for r in rows)]
    wls = [w for w in ALL_ORDER if any(r["workload"] == w for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / max(1, len(engines))
    for ax, tool, ylabel in ((axes[0], "instr", "user-space instructions per request"),
                             (axes[1], "sys", "system calls per request")):
        plotted = False
        for i, e in enumerate(engines):
            xs, ys = [], []
            for j, w in enumerate(wls):
                r = next((r for r in rows if r["engine"] == e and r["workload"] == w), None)
                m = r and r.get(tool)
                x = j + (i - (len(engines) - 1) / 2) * width
                if m and m.get("status") == "ok" and m["per_request"] > 0:
                    xs.append(x)
                    ys.append(m["per_request"])
                elif m and m.get("status") in ("error", "crashed"):
                    ax.text(x, 0.02, m["status"], rotation=90, ha="center", va="bottom",
                            fontsize=7, color="red", transform=ax.get_xaxis_transform())
            color = "tab:purple" if e == "ktcp-echo" else report.COLORS.get(e, "tab:green")
            ax.bar(xs, ys, width, label=e, color=color)
            plotted = plotted or bool(ys)
        ax.set_xticks(range(len(wls)))
        ax.set_xticklabels(wls, rotation=15)
        ax.set_ylabel(ylabel)
        if not plotted:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        elif tool == "instr":
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    c = doc["conditions"]
    fig.suptitle(f"Cost per request, counted (kernel {c['kernel']}, one connection, one worker;"
                 f" instructions: callgrind, system calls: strace)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cost.png"), dpi=110)
    plt.close(fig)


def reannotate(src, workloads):
    """The split by function of every workload in workloads (and of those
    split already), recomputed from the run's callgrind dumps."""
    with open(os.path.join(src, "cost.json")) as f:
        doc = json.load(f)
    for r in doc["rows"]:
        m = r.get("instr")
        if not m or m.get("status") != "ok" or not (m.get("functions") or
                                                     r["workload"] in workloads):
            continue
        base = os.path.join(src, "callgrind", f"{r['engine']}.{r['workload']}")
        fns = per_request_functions(base + ".n.out", base + ".2n.out", m["n"])
        m["functions"], m["functions_inclusive"] = fns["self"], fns["inclusive"]
        m["functions_total"] = fns["self_total"]
        m["files"] = per_request_files(base + ".n.out", base + ".2n.out", m["n"])
    with open(os.path.join(src, "cost.json"), "w") as f:
        json.dump(doc, f, indent=1)
    write_report(src, doc)


COST_BEGIN = "<!-- cost:begin -->"
COST_END = "<!-- cost:end -->"


def benchmarks_section(doc):
    """BENCHMARKS.md's generated part: the run's conditions and its tables
    (instructions, system calls, CPU time), each figure with its ratio to
    nginx's in the same run."""
    c = doc["conditions"]
    labels = {"small-keepalive": "13 B keep-alive",
              "small-close": "13 B, connection per request",
              "1mib": "1 MiB keep-alive", "304": "304 (If-None-Match)",
              "gzip": "cached gzip (64 KiB HTML)",
              "https-keepalive": "13 B keep-alive, TLS 1.3",
              "https-handshake": "13 B, new TLS 1.3 connection (full handshake)"}
    rows = doc["rows"]
    L = [COST_BEGIN,
         "<!-- Generated by tools/bench/cost.py --publish from docs/bench/cost.json; edit "
         "the prose outside the cost markers. -->", "",
         f"[`docs/bench/cost.json`](docs/bench/cost.json) (`{c.get('command')}`): "
         f"{c['date']}, git `{c.get('git')}`, **kernel {c['kernel']}, {c['cores']} cores, "
         f"load average {c['loadavg_start']} → {c.get('loadavg_end', '?')}**; one "
         "connection, one server worker, the client paced (instructions, system calls); "
         f"{plan.client_note(c)}; "
         f"{c['versions'].get('nginx')}"
         + (f", {c['versions']['lwan']}" if c["versions"].get("lwan") else "") + ".", ""]
    for tool, title in (("instr", "User-space instructions per request (callgrind Ir; "
                                  "kernel not counted)"),
                        ("sys", "System calls per request (strace -f -c, every thread "
                                "of the server)")):
        for order, over in ((HTTP_ORDER, ""), (HTTPS_ORDER, ", over TLS (× nginx-tls)")):
            if not any(r["workload"] in order for r in rows):
                continue
            t = table(doc, tool, "x", order)[2:]
            head = t[0].split(" | ")
            t[0] = " | ".join([head[0]] + [labels.get(h.strip(" |"), h.strip(" |"))
                                           for h in head[1:]]) + " |"
            L += [f"#### {title}{over}"] + t + [""]
    echo = next((r for r in rows if r["engine"] == "ktcp-echo"), None)
    if echo and (echo.get("instr") or {}).get("status") == "ok" and \
            (echo.get("sys") or {}).get("status") == "ok":
        L += [f"**ktcp-echo**, 64-byte echo round trips on one connection, paced: "
              f"{echo['instr']['per_request']:,.0f} instructions and "
              f"{echo['sys']['per_request']:.2f} system calls per round trip.", ""]
    L += cpu_split(doc)
    L.append(COST_END)
    return "\n".join(L)


def publish(src, dest, md=os.path.join(TOP, "BENCHMARKS.md")):
    """The run's cost.json, cost.md and cost.png, copied for the repository,
    and BENCHMARKS.md's tables between the cost markers regenerated from it
    (the reading of them is prose outside the markers)."""
    with open(os.path.join(src, "cost.json")) as f:
        doc = json.load(f)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "cost.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for name in ("cost.png", "cost.md"):
        shutil.copy(os.path.join(src, name), os.path.join(dest, name))
    with open(md) as f:
        text = f.read()
    a, b = text.find(COST_BEGIN), text.find(COST_END)
    if a < 0 or b < a:
        raise SystemExit(f"{md}: no {COST_BEGIN} ... {COST_END} section")
    with open(md, "w") as f:
        f.write(text[:a] + benchmarks_section(doc) + text[b + len(COST_END):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="results folder (default results/<timestamp>)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every batch size N (default 1; tests use 0.05)")
    ap.add_argument("--engines", help="comma-separated engine names (default all)")
    ap.add_argument("--workloads", help="comma-separated workloads (default all)")
    ap.add_argument("--tools", default="instr,sys,cpu",
                    help="comma-separated: instr, sys, cpu (default all three)")
    ap.add_argument("--annotate", default="small-keepalive,small-close",
                    help="workloads whose instructions are split by function "
                         "(default small-keepalive,small-close; '' for none)")
    ap.add_argument("--linearity", action="store_true",
                    help="a third batch of 3N too: per_request_3n = (count(3N) - count(2N)) / N "
                         "checks that counts grow linearly (tests)")
    ap.add_argument("--cpu-rounds", type=int, default=5,
                    help="rounds of the cpu tool, the engines alternating (default 5)")
    ap.add_argument("--budget", type=float, default=900,
                    help="seconds; workloads not started by then are skipped (default 900)")
    ap.add_argument("--reannotate", metavar="RESULTS",
                    help="recompute the split by function (of the --annotate workloads and "
                         "of those split already) from RESULTS/callgrind/ into "
                         "RESULTS/cost.{json,md,png} and exit")
    ap.add_argument("--publish", metavar="RESULTS",
                    help="copy RESULTS/cost.{json,png} to docs/bench/ and exit")
    a = ap.parse_args()
    if a.publish:
        publish(a.publish, os.path.join(TOP, "docs", "bench"))
        return 0
    if a.reannotate:
        reannotate(a.reannotate, set(a.annotate.split(",")) if a.annotate else set())
        return 0
    for t in a.tools.split(","):
        if t not in TOOLS:
            ap.error(f"--tools: {t} is not one of {', '.join(TOOLS)}")
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
