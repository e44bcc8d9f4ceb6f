"""The comparison harness (tools/bench) in its smoke profile: host only,
ktcp-httpd-epoll beside a private nginx, one keep-alive workload for half a
second in two rounds, and 200 idle connections for the memory check. Checks
that results.json, results.md and the PNGs are written and agree with each
other: every median and ratio is recomputed from the rounds in the JSON, and
--publish turns the folder into docs/bench/bench-host.json and the tables
between BENCHMARKS.md's bench markers (in copies)."""
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BENCH = os.path.join(TOP, "tools", "bench", "bench.py")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, os.path.join(TOP, "tools", "bench"))
sys.path.insert(0, os.path.join(TOP, "tools"))  # the engines package


def _nginx():
    return shutil.which("nginx", path=os.environ.get("PATH", "") + ":/usr/sbin")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    if not os.access(os.path.join(TOP, "build", "ktcp-httpd"), os.X_OK) or \
            not os.access(os.path.join(TOP, "build", "htstress"), os.X_OK):
        pytest.skip("build/ktcp-httpd or build/htstress not built (run make)")
    if not _nginx():
        pytest.skip("nginx not installed (scripts/deps installs it)")
    out = tmp_path_factory.mktemp("bench")
    r = subprocess.run([sys.executable, BENCH, "--profile", "smoke", "--out", str(out)],
                       capture_output=True, text=True, timeout=40, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "results.json") as f:
        doc = json.load(f)
    return out, doc, r.stdout


def test_progress_line_per_run(smoke):
    _, doc, stdout = smoke
    lines = [line for line in stdout.splitlines() if line.startswith("bench [")]
    assert len(lines) == sum(len(r["by_round"]) for r in doc["runs"])
    assert all("ETA" in line or "skipped" in line for line in lines)


def test_rounds_alternate(smoke):
    """The smoke profile's two rounds: nginx first in round 1, the other
    engine first in round 2 (the order rotates by one each round)."""
    _, _, stdout = smoke
    order = re.findall(r"http small-keepalive c=10 (r\d/2) (\S+):", stdout)
    assert order == [("r1/2", "nginx"), ("r1/2", "ktcp-httpd-epoll"),
                     ("r2/2", "ktcp-httpd-epoll"), ("r2/2", "nginx")], stdout


def test_plan_rotates_the_engines_each_round():
    import plan
    runs = plan.build("full", "host", ["nginx", "a", "b"], ["ktcp-echo"])
    pt = [(r["round"], r["engine"]) for r in runs
          if r["workload"] == "small-keepalive" and r["concurrency"] == 10]
    assert pt == [(1, "nginx"), (1, "a"), (1, "b"), (2, "a"), (2, "b"), (2, "nginx"),
                  (3, "b"), (3, "nginx"), (3, "a")]
    assert {r["rounds_planned"] for r in runs if r["suite"] in ("http", "echo")} == {3}
    assert all("round" not in r for r in runs if r["suite"] in ("lat", "memory"))
    # the quick profile runs lwan beside nginx, keep-alive sweep and per request
    runs = plan.build("quick", "host", ["nginx", "lwan", "ktcp-httpd-epoll"], ["ktcp-echo"])
    for wl in ("small-keepalive", "small-close"):
        for name in ("nginx", "lwan"):
            assert len([r for r in runs if r["workload"] == wl and r["engine"] == name]) >= 3


def test_plan_guest_https_points_with_few_responses_run_longer():
    """In the guest a 1-connection HTTPS run serves about 900 requests a
    second and 1 s rounds spread ±7-22 %; a full handshake costs 25 ms of
    emulated CPU, some 60 a 1 s round, spread ±7-31 %; 1 MiB at 10
    connections is 12-15 responses a round. Those points run 3 s, 100
    connections 1 s; and the table's head says so."""
    import plan
    import report
    runs = plan.build("https", "vm", ["nginx"], [], ["nginx-tls", "ktcp-httpd-epoll-tls"])
    d = {(r["workload"], r["concurrency"]): r["duration"] for r in runs if r["suite"] == "https"}
    assert d[("https-small-keepalive", 1)] == 3.0
    assert d[("https-handshake", 10)] == 3.0
    assert d[("https-1mib", 10)] == 3.0
    assert d[("https-small-keepalive", 100)] == 1.0
    head = report.https_table([dict(r, by_round=[]) for r in runs if r["suite"] == "https"],
                              "vm")[0]
    assert "1.0 s per run (3.0 s for 1 conn., new connections and 1 MiB)" in head, head
    host = plan.build("https", "host", ["nginx"], [], ["nginx-tls"])
    assert {r["duration"] for r in host if r["suite"] == "https"} == {1.5}


def test_floor_runs_its_workloads_and_divides_the_others():
    """The floor server runs in the rounds of the workloads it serves
    (13 B keep-alive and close, 1 MiB) and no other; every engine's figure
    at those points gets its ratio to the floor's."""
    import plan
    import report
    runs = plan.build("full", "host", ["nginx", "floor", "a"], [])
    floor_wls = {r["workload"] for r in runs if r["engine"] == "floor"}
    assert floor_wls == set(plan.FLOOR_WORKLOADS)
    assert {r["workload"] for r in runs if r["engine"] == "a"} == set(plan.HTTP_WORKLOADS)
    pts = [{"env": "host", "suite": "http", "workload": "1mib", "concurrency": 10,
            "engine": e, "status": "ok", "value": v}
           for e, v in (("nginx", 100.0), ("floor", 400.0), ("a", 300.0))]
    report.add_ratios(pts)
    report.add_floor_ratios(pts)
    by = {r["engine"]: r for r in pts}
    assert by["a"]["floor_ratio"] == 0.75 and by["nginx"]["floor_ratio"] == 0.25
    assert by["floor"]["floor_ratio"] is None
    assert "[floor ×0.75]" in report.cell(by["a"])


def test_json_runs_and_ratios(smoke):
    _, doc, _ = smoke
    assert doc["conditions"]["host"]["kernel"] == os.uname().release
    assert doc["conditions"]["host"]["cores"] == os.cpu_count()
    http = {r["engine"]: r for r in doc["runs"] if r["suite"] == "http"}
    assert set(http) == {"nginx", "ktcp-httpd-epoll"}
    for r in http.values():
        assert r["status"] == "ok", r
        assert r["workload"] == "small-keepalive" and r["keep_alive"] and r["file_size"] == 13
        # every round kept, the figure their median
        assert r["rounds_planned"] == r["rounds_ok"] == len(r["by_round"]) == 2
        assert [x["round"] for x in r["by_round"]] == [1, 2]
        assert r["values"] == [x["value"] for x in r["by_round"]]
        for x in r["by_round"]:
            raw = x["raw"]
            assert x["status"] == "ok" and x["value"] == raw["req_per_s"] > 0
            assert raw["good"] > 0 and raw["mode"] == "keep-alive"
            assert raw["requests"] == raw["good"] + raw["bad"] + raw["errors"]["total"]
        assert r["value"] == pytest.approx(statistics.median(r["values"]))
        assert r["min"] == min(r["values"]) <= r["value"] <= r["max"] == max(r["values"])
        assert r["spread_pct"] == pytest.approx(
            100 * max(r["max"] - r["value"], r["value"] - r["min"]) / r["value"])
        # the table's other fields come from a round that ran
        assert r["raw"] in [x["raw"] for x in r["by_round"]]
        assert r["bytes_per_response"] == pytest.approx(r["raw"]["bytes_read"] /
                                                        r["raw"]["good"])
    nginx = http["nginx"]
    for r in doc["runs"]:
        if r["status"] != "ok":
            continue
        peer = next(p for p in doc["runs"] if p["engine"] == doc["peers"][r["suite"]] and
                    p["suite"] == r["suite"] and p["workload"] == r["workload"] and
                    p["concurrency"] == r["concurrency"] and p["env"] == r["env"])
        assert r["peer_value"] == peer["value"]
        # median over the peer's median; the range of the same-round ratios
        assert r["ratio"] == pytest.approx(r["value"] / peer["value"], rel=1e-9)
        per = [a / b for a, b in zip(r["values"], peer["values"])]
        assert r["ratio_rounds"] == pytest.approx(per)
        assert r["ratio_min"] == pytest.approx(min(per))
        assert r["ratio_max"] == pytest.approx(max(per))
    epoll = http["ktcp-httpd-epoll"]
    assert epoll["ratio"] == pytest.approx(
        statistics.median(epoll["values"]) / statistics.median(nginx["values"]))
    assert nginx["ratio"] == 1.0


def test_memory_check(smoke):
    _, doc, _ = smoke
    mem = {r["engine"]: r for r in doc["runs"] if r["suite"] == "memory"}
    assert set(mem) == {"nginx", "ktcp-httpd-epoll"}
    for r in mem.values():
        m = r["raw"]
        assert r["status"] == "ok"
        assert len(r["by_round"]) == 1 and r["values"] == [r["value"]]
        assert m["connections_asked"] == 200 and m["connections_idle"] == 200, m
        assert r["value"] == pytest.approx(m["rss_kib"] / 1024)
        assert m["rss_kib"] > 0 and m["hwm_kib"] >= m["rss_kib"]
    assert mem["nginx"]["raw"]["processes"] >= 2  # master and workers counted
    assert mem["ktcp-httpd-epoll"]["raw"]["processes"] == 1


def test_markdown_carries_figures_ratios_and_conditions(smoke):
    out, doc, _ = smoke
    md = (out / "results.md").read_text()
    cond = doc["conditions"]["host"]
    assert cond["kernel"] in md and f"{cond['cores']} cores" in md
    assert cond["loadavg_start"] in md
    for r in doc["runs"]:
        if r["suite"] == "http":
            v = f"{r['value']:,.0f} ±{r['spread_pct']:.0f}%"
            if r["engine"] == "nginx":
                assert f"| nginx | {v} |" in md
            else:
                assert f"| {r['engine']} | {v} (×{r['ratio']:.2f}, {r['ratio_min']:.2f}–" \
                       f"{r['ratio_max']:.2f}) |" in md
        # the every-run table: environment, workload, concurrency, ratio
        row = re.search(rf"\| {r['env']} \| {r['suite']} \| {r['workload']} \| "
                        rf"{re.escape(r['engine'])} \| {r['concurrency']} \|[^\n]*"
                        rf"\| {r['ratio']:.3f} {r['peer']} \|", md)
        assert row, (r["engine"], r["suite"])
    assert "lwan" in md  # skipped with its reason, or measured


def test_pngs_written_and_linked(smoke):
    out, _, _ = smoke
    md = (out / "results.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert {"latency-http.png", "memory.png"} <= set(linked)
    for name in linked:
        data = (out / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, name


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_publish_writes_json_and_fills_the_markers(smoke, tmp_path):
    """--publish: docs-dir/bench-host.json with every point's rounds,
    median, spread, ratio and the run's conditions, the plots copied, and a
    copy of BENCHMARKS.md whose bench markers hold the tables made from
    that JSON, the prose outside them unchanged (the real file untouched)."""
    out, doc, _ = smoke
    real = os.path.join(TOP, "BENCHMARKS.md")
    before = _sha(real)
    md = tmp_path / "BENCHMARKS.md"
    shutil.copy(real, md)
    text = md.read_text()
    i, j = text.index("<!-- bench:begin -->"), text.index("<!-- bench:end -->")
    docs = tmp_path / "docs"
    r = subprocess.run([sys.executable, BENCH, "--publish", str(out), "--docs-dir", str(docs),
                        "--bench-md", str(md)], capture_output=True, text=True, timeout=60,
                       cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _sha(real) == before
    assert not (docs / "bench-vm.json").exists()  # the smoke run has no VM phase
    pub = json.loads((docs / "bench-host.json").read_text())
    assert (docs / "bench-host.json").stat().st_size < 20000  # no tool output
    cond = pub["conditions"]
    assert cond["kernel"] == os.uname().release and cond["cores"] == os.cpu_count()
    assert cond["loadavg_start"] and cond["loadavg_end"] and cond["nginx"]
    assert pub["meta"]["profile"] == "smoke" and pub["meta"]["git"] and pub["meta"]["started"]
    assert pub["source"] == out.name
    pts = {(p["suite"], p["engine"]): p for p in pub["points"]}
    assert set(pts) == {(r["suite"], r["engine"]) for r in doc["runs"]}
    for p in pub["points"]:
        assert "raw" not in p or p["suite"] in ("memory", "lat")
        assert p["env"] == "host" and p["kernel"] == cond["kernel"]
        assert len(p["values"]) == len(p["by_round"]) == p["rounds_planned"]
        assert p["min"] <= p["value"] <= p["max"]
        assert p["value"] == pytest.approx(statistics.median(p["values"]), rel=1e-5)
        peer = pts[(p["suite"], p["peer"])]
        assert p["ratio"] == pytest.approx(p["value"] / peer["value"], rel=1e-4)
    assert len(pts[("http", "ktcp-httpd-epoll")]["values"]) == 2
    assert pts[("memory", "nginx")]["raw"]["connections_idle"] == 200
    for name in ("latency-http.png", "memory.png"):
        assert (docs / name).read_bytes() == (out / name).read_bytes()
    new = md.read_text()
    assert new[:i] == text[:i]
    assert new.endswith(text[j + len("<!-- bench:end -->"):])
    section = new[i:new.index("<!-- bench:end -->")]
    for p in pub["points"]:
        if p["suite"] == "http":
            v = f"{p['value']:,.0f} ±{p['spread_pct']:.0f}%"
            assert (f"| nginx | {v} |" if p["engine"] == "nginx" else
                    f"| {p['engine']} | {v} (×{p['ratio']:.2f}, ") in section, p
    assert f"| host | `results/{out.name}` | `{pub['meta']['git']}` |" in section
    assert cond["kernel"] in section and cond["loadavg_start"] in section
    assert "median of 2 rounds" in section
    # publishing again from the same JSON gives the same file
    r = subprocess.run([sys.executable, BENCH, "--publish", str(out), "--docs-dir", str(docs),
                        "--bench-md", str(md)], capture_output=True, text=True, timeout=60,
                       cwd=TOP)
    assert r.returncode == 0 and md.read_text() == new


def test_merge_rounds_failures_and_skips():
    """A crash in any round is the point's result; a skipped round only
    lowers the count; a point with every round skipped is skipped."""
    import report

    def rec(engine, k, status, value=None, reason=""):
        return {"env": "host", "suite": "http", "workload": "w", "concurrency": 1,
                "engine": engine, "round": k, "rounds_planned": 3, "status": status,
                "value": value, "reason": reason, "unit": "req/s", "elapsed_s": 1.0}

    recs = [rec("nginx", 1, "ok", 100.0), rec("x", 1, "ok", 90.0), rec("y", 1, "ok", 5.0),
            rec("x", 2, "ok", 200.0), rec("y", 2, "crashed", None, "killed by SIGSEGV"),
            rec("nginx", 2, "ok", 110.0), rec("y", 3, "ok", 6.0),
            rec("nginx", 3, "skipped", None, "over the budget"),
            rec("x", 3, "ok", 120.0)]
    recs.append(dict(rec("z", 1, "skipped", None, "over the budget")))
    runs = {r["engine"]: r for r in report.merge_rounds(recs)}
    assert list(runs) == ["nginx", "x", "y", "z"]
    n, x, y, z = runs["nginx"], runs["x"], runs["y"], runs["z"]
    assert n["status"] == "ok" and n["values"] == [100.0, 110.0, None] and n["rounds_ok"] == 2
    assert n["value"] == 105.0 and "2 of 3 rounds" in n["note"]
    assert x["values"] == [90.0, 200.0, 120.0] and x["value"] == 120.0
    assert (x["min"], x["max"]) == (90.0, 200.0)
    assert x["spread_pct"] == pytest.approx(100 * 80 / 120)
    assert y["status"] == "crashed" and y["reason"] == "round 2 of 3: killed by SIGSEGV"
    assert y["values"] == [5.0, None, 6.0]
    assert z["status"] == "skipped" and z["value"] is None
    report.add_ratios(list(runs.values()))
    assert x["ratio"] == pytest.approx(120 / 105)
    assert x["ratio_rounds"] == pytest.approx([0.9, 200 / 110])  # round 3: no peer
    assert y["ratio"] is None and z["ratio"] is None
    assert report.cell(y) == "crashed"


def test_ratio_needs_a_peer_in_the_same_environment():
    import report
    runs = [
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 1, "engine": "nginx",
         "status": "ok", "value": 100.0},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 1, "engine": "x",
         "status": "ok", "value": 150.0},
        {"env": "vm", "suite": "http", "workload": "w", "concurrency": 1, "engine": "x",
         "status": "ok", "value": 10.0},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 10, "engine": "nginx",
         "status": "failed", "value": None},
        {"env": "host", "suite": "http", "workload": "w", "concurrency": 10, "engine": "x",
         "status": "ok", "value": 5.0},
    ]
    report.add_ratios(runs)
    assert [r["ratio"] for r in runs] == [1.0, 1.5, None, None, None]


# ---------------------------------------------------------------- engine failures

# A stand-in engine: an HTTP server on the bench's document root that kills
# itself with SIGSEGV on its CRASH_AT-th request (the harness's own workload
# checks come first, so the crash lands inside a measured run).
CRASHER = r'''
import http.server, os, signal, sys
port, root, crash_at = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
seen = [0]
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def log_message(self, *a):
        pass
    def do_GET(self):
        seen[0] += 1
        if seen[0] >= crash_at:
            os.kill(os.getpid(), signal.SIGSEGV)
        super().do_GET()
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def crasher_engine(script, crash_at):
    import engines as eng

    class Crasher(eng.Engine):
        def __init__(self):
            super().__init__("crasher")

        def argv(self, port, o):
            return [sys.executable, str(script), str(port), o["root"], str(crash_at)]

    return Crasher()


def test_engine_crash_and_start_failure_are_results(tmp_path, monkeypatch):
    """A crash mid-run is that run's result ('crashed', with the signal), the
    next run starts the engine anew, an engine that cannot start is an
    'error: did not start' row, and the harness itself finishes and writes
    its report."""
    if not os.access(os.path.join(TOP, "build", "htstress"), os.X_OK):
        pytest.skip("build/htstress not built (run make)")
    import bench
    import engines as eng
    import plan
    import report
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    # the harness checks 5 workloads at each start; the 6th request is htstress's
    crasher = crasher_engine(script, len(plan.HTTP_WORKLOADS) + 1)
    monkeypatch.setenv("LWAN", "/bin/false")  # lwan "given" but exits at once
    monkeypatch.setattr(eng, "http_engines", lambda env: [crasher, eng.Lwan()])
    monkeypatch.setattr(eng, "echo_engines", lambda env: [])
    monkeypatch.setitem(plan.PROFILES, "crash-test", {"host": {
        "sweep": [1], "close_sweep": [1], "single_c": None, "duration": 0.3,
        "timeout_ms": 1000, "workloads": ["small-keepalive", "small-close"],
        "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
        "memory_conns": 0, "engines": None, "budget_s": 60}, "total_budget_s": 60})
    out = tmp_path / "out"
    out.mkdir()
    doc = bench.run_phase("host", "crash-test", str(out), 60)
    runs = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    for wl in ("small-keepalive", "small-close"):
        r = runs[("crasher", wl)]
        assert r["status"] == "crashed", r
        assert "killed by SIGSEGV" in r["reason"], r
        lw = runs[("lwan", wl)]
        assert lw["status"] == "failed" and lw["reason"].startswith("did not start"), lw
    # the report shows them where the figures would be
    report.add_ratios(doc["runs"])
    assert report.cell(runs[("crasher", "small-close")]) == "crashed"
    assert report.cell(runs[("lwan", "small-close")]).startswith("error: did not start")
    assert any(s["engine"] == "lwan" and "did not start" in s["reason"] for s in doc["skipped"])


def test_cost_engine_crash_is_a_result(tmp_path):
    """bench-cost: an engine that dies during a workload gets 'crashed' for
    it, and is started anew for the next workload (whose crash is its own)."""
    if not os.access(os.path.join(TOP, "build", "htstress"), os.X_OK):
        pytest.skip("build/htstress not built (run make)")
    if not shutil.which("strace"):
        pytest.skip("strace not installed (scripts/deps installs it)")
    import bench
    import cost
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    ctx = bench.Ctx()
    ctx.out, ctx.tmp = str(tmp_path), str(tmp_path)
    ctx.docroot = str(tmp_path / "www")
    bench.make_docroot(ctx.docroot)
    ctx.workers, ctx.scale, ctx.annotate = 1, 0.05, set()
    e = crasher_engine(script, 3)  # probe, then the warm-up's second request
    results = {}
    cost.measure(e, cost.Strace(ctx), ["small-keepalive", "small-close"], ctx,
                 time.monotonic() + 60, results)
    for wl in ("small-keepalive", "small-close"):
        m = results[("crasher", wl)]["sys"]
        assert m["status"] == "crashed" and "killed by SIGSEGV" in m["reason"], m
    assert cost.cell_text(m) == "crashed"
    assert e.proc is None  # stopped, nothing left running


# ---------------------------------------------------------------- bench-cost

@pytest.fixture(scope="module")
def cost_smoke(tmp_path_factory):
    """make bench-cost in miniature: ktcp-httpd-epoll and ktcp-echo, N = 50
    (keep-alive, connection per request; echo) under both counters, with a
    third batch of 3N to check linearity. What a batch costs once varies by
    up to ~20,000 instructions (the RCU thread's grace periods, the counter
    controls interrupting the wait), so N is 50, not 10: 400 per request at
    most, against 500-15,000 per request."""
    for b in ("ktcp-httpd", "ktcp-echo", "htstress"):
        if not os.access(os.path.join(TOP, "build", b), os.X_OK):
            pytest.skip(f"build/{b} not built (run make)")
    for t in ("valgrind", "callgrind_control", "strace"):
        if not shutil.which(t):
            pytest.skip(f"{t} not installed (scripts/deps installs it)")
    out = tmp_path_factory.mktemp("cost")
    r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "bench", "cost.py"),
                        "--scale", "0.25", "--engines", "ktcp-httpd-epoll,ktcp-echo",
                        "--workloads", "small-keepalive,small-close,1mib,echo", "--out", str(out),
                        "--linearity", "--cpu-rounds", "2", "--budget", "120"],
                       capture_output=True, text=True, timeout=240, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "cost.json") as f:
        doc = json.load(f)
    return out, doc, {(x["engine"], x["workload"]): x for x in doc["rows"]}


def kernel_has_tls_ulp():
    """As ktcp-httpd probes it: on an unconnected socket a kernel with the
    tls ULP answers ENOTCONN, one without it ENOENT."""
    import errno
    import socket
    with socket.socket() as s:
        try:
            s.setsockopt(socket.IPPROTO_TCP, 31, b"tls")  # TCP_ULP
        except OSError as e:
            return e.errno != errno.ENOENT
    return True


def test_cost_counts_tls_requests_and_handshakes(tmp_path):
    """make bench-cost also counts a request over TLS 1.3 on a kept
    connection and a full handshake, for ktcp-httpd and for nginx with its
    OpenSSL records, each figure beside nginx's. A handshake costs
    millions of instructions (a signature and a key exchange), a request
    tens of thousands. Where the kernel has no tls ULP, ktcp-httpd neither
    asks for kTLS on each connection nor reads a record's header and body
    apart, so a handshake takes fewer system calls than nginx's; and a kept
    connection's request is one read, not a second that finds nothing."""
    for t in ("valgrind", "callgrind_control", "strace", "nginx"):
        if not shutil.which(t):
            pytest.skip(f"{t} not installed (scripts/deps installs it)")
    out = tmp_path / "cost"
    r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "bench", "cost.py"),
                        "--scale", "0.25", "--engines", "ktcp-httpd-epoll-tls,nginx-tls",
                        "--tools", "instr,sys", "--out", str(out), "--budget", "120"],
                       capture_output=True, text=True, timeout=300, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "cost.json") as f:
        rows = {(x["engine"], x["workload"]): x for x in json.load(f)["rows"]}
    assert set(rows) == {(e, w) for e in ("ktcp-httpd-epoll-tls", "nginx-tls")
                         for w in ("https-keepalive", "https-handshake")}
    for key, row in rows.items():
        for tool in ("instr", "sys"):
            assert row[tool]["status"] == "ok", (key, tool, row[tool])
    for e in ("ktcp-httpd-epoll-tls", "nginx-tls"):
        ka = rows[(e, "https-keepalive")]["instr"]["per_request"]
        hs = rows[(e, "https-handshake")]["instr"]["per_request"]
        assert 5_000 < ka < 200_000 and hs > 500_000, (e, ka, hs)
    ours = rows[("ktcp-httpd-epoll-tls", "https-handshake")]["sys"]
    theirs = rows[("nginx-tls", "https-handshake")]["sys"]
    assert ours["by_name"].get("accept4", 0) >= 0.9  # a connection each
    if not kernel_has_tls_ulp():
        assert ours["by_name"].get("setsockopt", 0) < 0.1, ours
        assert ours["per_request"] < theirs["per_request"], (ours, theirs)
        # a kept connection's request: one read of the socket, its record
        # and nothing after it (OpenSSL's read found the socket empty), not
        # a second read for EAGAIN
        ka = rows[("ktcp-httpd-epoll-tls", "https-keepalive")]["sys"]
        assert ka["by_name"].get("read", 0) < 1.2 and ka["per_request"] < 3.5, ka
    md = (out / "cost.md").read_text()
    assert "https-handshake" in md and "(×" in md


def test_cost_every_cell_measured(cost_smoke):
    _, doc, rows = cost_smoke
    assert set(rows) == {("ktcp-httpd-epoll", "small-keepalive"),
                         ("ktcp-httpd-epoll", "small-close"), ("ktcp-httpd-epoll", "1mib"),
                         ("ktcp-echo", "echo")}
    for key, row in rows.items():
        for tool in ("instr", "sys"):
            m = row[tool]
            assert m["status"] == "ok", (key, tool, m)
            assert m["n"] == (5 if key[1] == "1mib" else 50)
            # per request is the 2N batch less the N batch, over N
            assert m["per_request"] == pytest.approx((m["b"] - m["a"]) / m["n"])
            assert m["fixed"] == 2 * m["a"] - m["b"]
    assert doc["conditions"]["kernel"] == os.uname().release
    assert doc["conditions"]["concurrency"] == 1


def test_cost_cpu_split(cost_smoke):
    out, _, rows = cost_smoke
    for wl, n, conc in (("small-keepalive", 25_000, 100), ("small-close", 5_000, 100),
                        ("1mib", 1_250, 10)):
        m = rows[("ktcp-httpd-epoll", wl)]["cpu"]
        assert m["status"] == "ok", m
        assert m["n"] == n and m["concurrency"] == conc
        # the server's time is its user and kernel time; the client's is apart
        assert m["per_request"] == pytest.approx(m["user"] + m["kernel"], rel=1e-6)
        # (the split is in clock ticks: a small batch may see no user tick)
        assert m["user"] >= 0 and m["kernel"] > 0 and m["client"] > 0, m
        # a request takes microseconds, not nothing and not a millisecond
        assert 0.5 < m["per_request"] + m["client"] < 1000, m
        assert m["requests_per_s"] > 0
        # two alternating rounds: the time is the lower one's (the
        # median of an even number is its lower middle), the rate the
        # lower of the two rates
        assert len(m["rounds"]) == 2 and m["rounds"] == sorted(m["rounds"]), m
        assert m["per_request"] == pytest.approx(m["rounds"][0], abs=0.01)
        assert m["requests_per_s"] == pytest.approx(min(m["rounds_rps"]), abs=0.1)
        # the rounds are listed to 0.01 µs and the spread to 0.1 %, so a
        # spread recomputed from the list may differ by up to
        # 0.5 * (1 + r1 / r0) / r0 % and 0.05 (5.67 and 5.84 µs: 0.23)
        r0, r1 = m["rounds"]
        assert m["spread_pct"] == pytest.approx(
            (r1 - r0) / r0 * 100, abs=0.1 + 0.6 * (1 + r1 / r0) / r0)
    assert rows[("ktcp-echo", "echo")]["cpu"]["status"] == "skipped"
    with open(out / "cost.md") as f:
        assert "CPU time per request" in f.read()


def test_cost_cpu_figures_whole_batches():
    """The CPU time per request is over both batches whole: on a loaded
    host the 2N batch has been measured below the N batch (these are the
    figures of such a run: 1 MiB, N = 1,250), and their difference made
    the time per request negative."""
    sys.path.insert(0, os.path.join(TOP, "tools", "bench"))
    import cost
    a = {"total": 404832.46, "user_ticks": 0, "kernel_ticks": 40, "client": 90000.0}
    b = {"total": 320442.465, "user_ticks": 1, "kernel_ticks": 31, "client": 150000.0}
    m = cost.cpu_figures(a, b, 1250)
    assert m["per_request"] == pytest.approx((404832.46 + 320442.465) / 3750)
    assert m["user"] == pytest.approx(m["per_request"] / 72)
    assert m["user"] + m["kernel"] == pytest.approx(m["per_request"])
    assert m["kernel"] > 0 and m["client"] == pytest.approx(240000 / 3750)
    # no ticks at all (a very short batch): all of it is counted as kernel
    z = cost.cpu_figures(dict(a, kernel_ticks=0), dict(b, user_ticks=0, kernel_ticks=0), 1250)
    assert z["user"] == 0 and z["kernel"] == pytest.approx(z["per_request"])


def test_cost_cpu_rounds_merge_to_the_median():
    """The cpu tool's rounds of a point: the median round by the server's
    time, every round's time listed, the spread the largest distance
    from the median; the rate the median of the rates on its own; a
    round that failed is listed, and with none ok
    the first round's record stands."""
    sys.path.insert(0, os.path.join(TOP, "tools", "bench"))
    import cost

    def rec(us, rps):
        return {"status": "ok", "per_request": us, "user": 1.0, "kernel": us - 1.0,
                "client": 40.0, "requests_per_s": rps}
    m = cost.merge_cpu_rounds([rec(18.0, 30000), rec(15.0, 34000),
                               {"status": "error", "reason": "warm-up: refused"},
                               rec(16.0, 33000)])
    assert m["per_request"] == 16.0 and m["requests_per_s"] == 33000
    assert m["rps_spread_pct"] == pytest.approx(3000 / 33000 * 100, abs=0.1)
    # the rate is the median of the rates, not the median-time round's
    r = cost.merge_cpu_rounds([rec(15.0, 5000), rec(16.0, 9000), rec(17.0, 8000)])
    assert r["per_request"] == 16.0 and r["requests_per_s"] == 8000
    assert r["rounds_rps"] == [5000, 9000, 8000]
    assert m["rounds"] == [15.0, 16.0, 18.0] and m["rounds_rps"] == [34000, 33000, 30000]
    assert m["spread_pct"] == pytest.approx(12.5)
    assert m["rounds_failed"] == ["warm-up: refused"]
    bad = {"status": "crashed", "reason": "signal 11"}
    assert cost.merge_cpu_rounds([bad, {"status": "skipped"}]) is bad


def test_cost_publish_fills_the_markers(cost_smoke, tmp_path):
    """--publish copies the run to the docs folder and regenerates the
    tables between BENCHMARKS.md's cost markers, leaving the prose."""
    out, doc, _ = cost_smoke
    sys.path.insert(0, os.path.join(TOP, "tools", "bench"))
    import cost
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("before\n<!-- cost:begin -->\nold table\n<!-- cost:end -->\nafter\n")
    docs = tmp_path / "docs"
    cost.publish(str(out), str(docs), str(md))
    text = md.read_text()
    assert text.startswith("before\n<!-- cost:begin -->") and text.endswith(
        "<!-- cost:end -->\nafter\n")
    assert "old table" not in text
    assert f"git `{doc['conditions']['git']}`" in text
    ka = doc["rows"][0]
    assert "| ktcp-httpd-epoll |" in text and "13 B keep-alive" in text
    assert f"{ka['instr']['per_request']:,.0f}" in text
    assert "CPU time per request" in text
    for name in ("cost.json", "cost.md", "cost.png"):
        assert (docs / name).exists()
    # publishing again gives the same file
    cost.publish(str(out), str(docs), str(md))
    assert md.read_text() == text


def test_cost_instructions_scale_between_n_and_2n(cost_smoke):
    _, _, rows = cost_smoke
    for key, row in rows.items():
        if key[1] == "1mib":
            continue  # 5 requests: within what a batch costs once (see cost_smoke)
        m = row["instr"]
        # N more requests cost the same from 2N to 3N as from N to 2N: the
        # count is linear in the requests, so the difference is per request
        assert m["b"] > m["a"] > 0 and m["c"] > m["b"], (key, m)
        assert m["per_request_3n"] == pytest.approx(m["per_request"], rel=0.15), (key, m)
        # what a batch costs once (a connection, the dump) is not negative
        # (within a quarter of the first batch: a loaded host adds wake-ups)
        assert m["fixed"] > -0.25 * m["a"], (key, m)
        # the calls that serve a request, likewise: those that succeed.
        # The server's other threads (timers, RCU) wake by time, not by
        # request, and are left out here; so are the calls that fail with
        # EAGAIN, whose number depends on whether the client's bytes beat
        # the server's next read (a new connection's request arriving after
        # its accept costs a read that would block and one more wait).
        s = row["sys"]

        def served(by_name, errors, call):
            return by_name.get(call, 0) - errors.get(call, 0)

        for call in ("recvfrom", "sendmsg", "sendto", "accept4", "read",
                     "write", "writev", "sendfile"):
            # (a loaded host adds an occasional wake-up: 0.1 of a call per
            # request at the smoke test's 50 requests is five of them)
            assert served(s["by_name_3n"], s["errors_per_request_3n"], call) == pytest.approx(
                served(s["by_name"], s["errors_per_request"], call), abs=0.25), (key, call, s)
    ka = rows[("ktcp-httpd-epoll", "small-keepalive")]["instr"]["per_request"]
    close = rows[("ktcp-httpd-epoll", "small-close")]["instr"]["per_request"]
    echo = rows[("ktcp-echo", "echo")]["instr"]["per_request"]
    # an HTTP request is parsed and answered: thousands of instructions, an
    # echo a few hundred; a new connection per request costs about as much
    # (its coroutine comes from the worker's pool and its address is
    # formatted only for a log, so the accept adds a few hundred at most;
    # the system calls test shows what it adds there)
    assert 1000 < ka < 100_000 and echo < ka and close > 0.9 * ka


def test_cost_syscalls_per_request(cost_smoke):
    _, _, rows = cost_smoke
    ka = rows[("ktcp-httpd-epoll", "small-keepalive")]["sys"]
    # keep-alive on epoll, paced: read, answer, a read that would block, wait
    assert 2 <= ka["per_request"] <= 8, ka
    assert ka["per_request"] == pytest.approx(sum(ka["by_name"].values()))
    # the runtime waits with epoll_pwait (no mask: epoll_wait without
    # libc's cancellation point)
    assert ka["by_name"].get("epoll_pwait", 0) > 0.5
    assert ka["by_name"].get("accept4", 0) < 0.5  # one connection for the batch
    close = rows[("ktcp-httpd-epoll", "small-close")]["sys"]
    assert close["by_name"].get("accept4", 0) >= 0.9  # a connection per request
    assert close["by_name"].get("close", 0) >= 0.9
    # one accept each: the level-triggered listener reports each connection,
    # so no accept fails with EAGAIN; and no setsockopt, because accepted
    # sockets inherit the listener's TCP_NODELAY
    assert close["by_name"].get("accept4", 0) <= 1.1, close
    assert close["by_name"].get("setsockopt", 0) < 0.1, close
    assert close["per_request"] > ka["per_request"]
    echo = rows[("ktcp-echo", "echo")]["sys"]
    assert 2 <= echo["per_request"] <= 8, echo


def test_cost_functions_and_report(cost_smoke):
    out, doc, rows = cost_smoke
    m = rows[("ktcp-httpd-epoll", "small-keepalive")]["instr"]
    fns = m["functions"]
    assert len(fns) >= 5
    # named with their files; with link-time optimisation the parser is
    # inlined into the connection's loop, the planner's steps keep names
    assert any("(core/" in f["function"] for f in fns), fns
    assert any("(user/httpd/" in f["function"] for f in fns), fns
    # by source file the parser's instructions are its own, inlined or not
    files = {f["file"]: f["ir_per_request"] for f in m["files"]}
    assert files.get("core/http_parser.c", 0) > 100, files
    assert "by source file" in (out / "cost.md").read_text()
    # the split by function adds up to (about) the dump totals
    assert m["functions_total"] == pytest.approx(m["per_request"], rel=0.1)
    assert sum(f["ir_per_request"] for f in fns) <= m["functions_total"] * 1.01
    md = (out / "cost.md").read_text()
    assert doc["conditions"]["kernel"] in md
    for (engine, wl), row in rows.items():
        for tool in ("instr", "sys"):
            import cost
            assert f"| {engine} |" in md and cost.fmt_n(row[tool]["per_request"]) in md
    png = (out / "cost.png").read_bytes()
    assert png[:8] == PNG_MAGIC and len(png) > 5000


# ---------------------------------------------------------------- echo and kcm profiles

def _built(*names):
    for b in names:
        if not os.access(os.path.join(TOP, "build", b), os.X_OK):
            pytest.skip(f"build/{b} not built (run make)")


def test_echo_profile_runs_and_reports(tmp_path, monkeypatch):
    """bench.py --profile echo in miniature, on the host: echo-bench against
    ktcp-echo in two models as the profile runs each engine (in the VM,
    kecho.ko in each mode too), then its report: results.json holds
    echo-bench's figures, results.md each engine's row with its ratio to
    ktcp-echo, latency.png the CDF of the samples."""
    _built("ktcp-echo", "echo-bench")
    import bench
    import echo_profile
    import engines as eng
    monkeypatch.setattr(bench, "drop_time_wait", lambda: 0)  # drop_tcp_socket.ko: VM only
    s = {"BENCH_CLIENTS": 20, "BENCH_ROUNDS": 3, "BENCH_MIN_LEN": 1, "BENCH_MAX_LEN": 512}
    out = tmp_path / "out"
    out.mkdir()
    for model in ("epoll", "mn"):
        e = eng.UserEcho(str(tmp_path), model).start(idle_timeout_ms=None, max_conns=None,
                                                     settle=False)
        try:
            echo_profile.run_one(e, str(out), s)
        finally:
            e.stop()
    text = echo_profile.report(str(out), "test conditions")
    with open(out / "results.json") as f:
        doc = json.load(f)
    assert doc["conditions"] == "test conditions"
    assert set(doc["runs"]) == {"ktcp-echo", "ktcp-echo-mn"}
    md = (out / "results.md").read_text()
    assert text.strip() == md.strip() and "Conditions: test conditions" in md
    peer = doc["runs"]["ktcp-echo"]["req_per_s"]
    for name, r in doc["runs"].items():
        assert r["ok"] == 60 and r["mismatches"] == 0 and r["failed_clients"] == 0, r
        assert r["clients"] == 20 and r["rounds"] == 3 and r["max_len"] == 512
        lat = r["latency_us"]
        assert f"| {name} | {r['req_per_s']:.0f} | {r['req_per_s'] / peer:.2f} | " \
               f"{lat['p50']:.0f} | {lat['p90']:.0f} | {lat['p99']:.0f} |" in md
        assert len((out / f"{name}.samples").read_text().split()) == 60
    png = (out / "latency.png").read_bytes()
    assert png[:8] == PNG_MAGIC and len(png) > 5000


def test_kcm_profile_runs_and_reports(tmp_path):
    """bench.py --profile kcm in miniature, on the host (no AF_KCM here):
    msg-bench against the plain twin for one case, filed under both servers'
    names, then the report: table.md gives each column's median QPS, their
    ratio and the published figures; summary.json every run's QPS and the
    per-worker message counts the servers wrote at exit."""
    _built("ktcp-msg-server", "msg-bench")
    import kcm_profile
    s = {"duration": 1, "rounds": 2, "threads": 2}
    case = next(c for c in kcm_profile.CASES if c[0] == "work")
    case = case[:4] + (200,)  # 200 µs of work: a short run still counts replies
    out = tmp_path / "out"
    out.mkdir()
    for rnd in (1, 2):
        for label in ("msg", "kcm"):
            kcm_profile.run_case("msg", f"work-{label}-{rnd}", case, s, str(out))
    text = kcm_profile.report(str(out), s)
    table = (out / "table.md").read_text()
    assert text.startswith(table.strip())
    with open(out / "summary.json") as f:
        doc = json.load(f)
    assert set(doc["cases"]) == {"work"}  # the others: no result
    assert "| large | ~5 KB messages, no work | (no result) |" in table
    runs = {label: [json.loads((out / f"work-{label}-{r}.json").read_text()) for r in (1, 2)]
            for label in ("msg", "kcm")}
    for label, key in (("msg", "plain_qps"), ("kcm", "kcm_qps")):
        assert doc["cases"]["work"][key] == [r["qps"] for r in runs[label]]
        assert all(r["qps"] > 0 for r in runs[label])
    # msg-bench's errors (a stall on a loaded host) are flagged on the row
    errs = sum(sum(r["errors"].values()) for rs in runs.values() for r in rs)
    row = next(line for line in table.splitlines() if line.startswith("| work |"))
    assert row.endswith(f"⚠ {errs} errors") if errs else row.endswith("|")
    mq = sum(doc["cases"]["work"]["plain_qps"]) / 2  # the median of two
    kq = sum(doc["cases"]["work"]["kcm_qps"]) / 2
    assert f"| {mq:,.0f} | {kq:,.0f} | {kq / mq:.2f} |" in table
    assert "| 14,282 → 23,192 (latency 559 → 344 µs) | 1.62 |" in table
    assert len(doc["cases"]["work"]["plain_worker_messages"]) == 2
    for per in doc["cases"]["work"]["plain_worker_messages"]:
        assert sum(int(n) for n in per.split("/")) > 0


def test_experiment_profiles_run_only_in_the_vm(tmp_path):
    """--phase vm of the echo and kcm profiles loads modules and AF_KCM: it
    refuses to run outside the project VM."""
    for profile in ("echo", "kcm"):
        r = subprocess.run([sys.executable, BENCH, "--profile", profile, "--phase", "vm",
                            "--out", str(tmp_path / profile)], capture_output=True, text=True,
                           timeout=30, cwd=TOP, env={k: v for k, v in os.environ.items()
                                                      if k != "KTCP_IN_VM"})
        assert r.returncode == 1 and "runs inside the VM" in r.stderr, r
        assert not (tmp_path / profile).exists()


# ---------------------------------------------------------------- bench-floor

def test_bench_floor_in_its_own_namespace(tmp_path):
    """make bench-floor in miniature: the floor and ktcp-httpd-epoll, one
    round of connection per request and one of 1 MiB, in a network
    namespace of its own. The kernel's counters there see only this run:
    every connection is one passive open, the floor's answer carries its
    FIN and the request's ACK (7 segments a connection: SYN, SYN-ACK, ACK,
    request, answer + FIN, the client's FIN, its ACK; a few more on a
    loaded host), and the server
    closes first (the TIME-WAIT sockets are the server's)."""
    for b in ("ktcp-httpd", "floor", "htstress"):
        if not os.access(os.path.join(TOP, "build", b), os.X_OK):
            pytest.skip(f"build/{b} not built (run make)")
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a network namespace needs root and unshare")
    r = subprocess.run([sys.executable, os.path.join(TOP, "tools", "bench", "floor_ab.py"),
                        "--engines", "floor,floor-http,ktcp-httpd-epoll", "--points",
                        "small-close-100,1mib-10", "--rounds", "1", "--scale", "0.05",
                        "--strace", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(tmp_path / "floor.json") as f:
        doc = json.load(f)
    assert doc["conditions"]["netns"]
    close = doc["summary"]["small-close-100"]
    for name in ("floor", "ktcp-httpd-epoll"):
        s = close[name]
        assert s["rounds_ok"] == 1, s
        assert s["TcpPassiveOpens"] == 1.0
        # the start-up probe (wait_port) is the one connection its client closes
        assert s["time_wait_server"] >= 250 and s["time_wait_client"] <= 1, s
    # a request that comes after the delayed ACK's timer adds a bare ACK
    assert 7.0 <= close["floor"]["TcpInSegs"] < 7.5
    assert close["ktcp-httpd-epoll"]["cpu_x_floor"] > 0
    big = doc["summary"]["1mib-10"]["ktcp-httpd-epoll"]
    assert big["rps_x_floor"] > 0 and big["server_us"] > 0
    calls = doc["strace"]["small-close-100"]["floor"]
    assert calls["by_name"]["accept4"] == 1.0 and calls["by_name"]["close"] == 1.0
    assert "shutdown" not in calls["by_name"]
    # floor-http shuts the write side first, as ktcp-httpd does
    assert doc["strace"]["small-close-100"]["floor-http"]["by_name"]["shutdown"] == 1.0
    md = (tmp_path / "floor.md").read_text()
    assert "| floor |" in md and "× floor" in md
