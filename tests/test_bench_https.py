"""The HTTPS points of the bench (tools/bench, suite https): htstress over
TLS (a full handshake per connection, nothing resumed), the smoke-https
profile run end to end on the host (ktcp-httpd epoll beside nginx over TLS,
keep-alive and new connections in two alternating rounds, 100 idle TLS
connections), its table, targets and publication (https-host.json, beside
the full run's bench-host.json), and idle TLS memory per connection of
ktcp-httpd at most nginx's."""
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BENCH = os.path.join(TOP, "tools", "bench", "bench.py")
HTSTRESS = os.path.join(TOP, "build", "htstress")

sys.path.insert(0, os.path.join(TOP, "tools", "bench"))
sys.path.insert(0, os.path.join(TOP, "tools"))  # the engines package

import engines as eng  # noqa: E402
from engines import tlscert  # noqa: E402


def _need(*paths):
    for p in paths:
        if not os.access(p, os.X_OK):
            pytest.skip(f"{os.path.relpath(p, TOP)} not built (run make)")
    if not eng.nginx_path():
        pytest.skip("nginx not installed (scripts/deps installs it)")


@pytest.fixture(scope="module")
def docroot(tmp_path_factory):
    import bench
    d = tmp_path_factory.mktemp("www")
    bench.make_docroot(str(d))
    return str(d)


@pytest.fixture(scope="module")
def tls_httpd(docroot, tmp_path_factory):
    _need(eng.HTTPD_BIN, HTSTRESS)
    e = eng.UserHttpd("epoll", str(tmp_path_factory.mktemp("log")), tls=True)
    e.start(docroot, user="root")
    yield e
    e.stop()


def htstress(*args, rc=0):
    r = subprocess.run([HTSTRESS, "--json", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == rc, r.stderr
    return json.loads(r.stdout) if rc == 0 else r.stderr


def test_htstress_full_handshake_per_connection(tls_httpd):
    """Connection per request over TLS 1.3: every request its own full
    handshake over X25519, none resumed though the server issues tickets."""
    j = htstress("-n", "60", "-c", "4", "-t", "2", f"https://127.0.0.1:{tls_httpd.port}/small.txt")
    assert j["good"] == 60 and j["errors"]["total"] == 0
    assert j["tls"]["handshakes"] == j["connects"] == 60 and j["tls"]["resumed"] == 0
    assert (j["tls"]["version"], j["tls"]["group"]) == ("TLSv1.3", "X25519")
    assert j["tls"]["cipher"] == "TLS_AES_128_GCM_SHA256"
    assert j["bytes_read"] == 60 * (j["bytes_read"] // 60) and j["bytes_read"] > 60 * 13


def test_htstress_tls12_keep_alive(tls_httpd):
    j = htstress("-k", "-n", "300", "-c", "3", "--tls-version", "1.2",
                 f"https://localhost:{tls_httpd.port}/small.txt")
    assert j["good"] == 300 and j["errors"]["total"] == 0
    assert j["tls"]["handshakes"] == j["connects"] == 3
    assert j["tls"]["version"] == "TLSv1.2" and j["tls"]["cipher"].startswith("ECDHE-ECDSA-AES128")


def test_htstress_tls_refusals(tls_httpd):
    # https:// to the plain port: each handshake fails, a connect error
    j = htstress("-n", "5", "-c", "1", f"https://127.0.0.1:{tls_httpd.plain_port}/small.txt")
    assert j["errors"]["connect"] == 5 and j["tls"]["handshakes"] == 0
    assert "1.2 or 1.3" in htstress("--tls-version", "1.1", "https://127.0.0.1:1/", rc=2)
    assert "https://" in htstress("--tls-version", "1.3", "http://127.0.0.1:1/", rc=2)


def slow_handshake_server(delay):
    """A keep-alive HTTPS server whose every handshake starts delay
    seconds after its accept; its requests are answered at once. Returns
    (port, stop)."""
    import socket
    import threading
    tls = tlscert.make_ca()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls["cert"], tls["key"])
    lsock = socket.create_server(("127.0.0.1", 0))
    lsock.settimeout(0.2)
    done = threading.Event()

    def serve(sock):
        try:
            time.sleep(delay)
            with ctx.wrap_socket(sock, server_side=True) as s:
                s.settimeout(10)
                buf = b""
                while not done.is_set():
                    got = s.recv(4096)
                    if not got:
                        return
                    buf += got
                    while b"\r\n\r\n" in buf:
                        _, _, buf = buf.partition(b"\r\n\r\n")
                        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except (OSError, ssl.SSLError):
            pass

    def accept():
        while not done.is_set():
            try:
                sock, _ = lsock.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(sock,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()

    def stop():
        done.set()
        lsock.close()
    return lsock.getsockname()[1], stop


def test_htstress_connect_first_leaves_handshakes_off_the_clock():
    """Keep-alive over TLS: with --connect-first every connection is open
    and its handshake done before the clock starts, so a run's seconds and
    req/s are its requests' alone. Without it, handshakes slower than the
    run (as under emulation, where a hundred take longer than a 1 s run)
    are all the run measures."""
    _need(HTSTRESS)
    port, stop = slow_handshake_server(0.5)
    try:
        url = f"https://127.0.0.1:{port}/x"
        first = htstress("-k", "--connect-first", "-n", "200", "-c", "4", "-t", "2", url)
        plain = htstress("-k", "-n", "200", "-c", "4", "-t", "2", url)
        timed = htstress("-k", "--connect-first", "-d", "0.3", "-c", "4", url)
    finally:
        stop()
    assert (first["connect_first"], plain["connect_first"]) == (True, False)
    for j in (first, plain):
        assert j["good"] == 200 and j["errors"]["total"] == 0, j
        assert j["tls"]["handshakes"] == j["connects"] == 4, j
    assert first["seconds"] < 0.4 <= plain["seconds"], (first["seconds"], plain["seconds"])
    assert first["latency_us"]["max"] < 400_000 <= plain["latency_us"]["max"]
    # by duration: the 0.3 s are requests only, none lost to handshakes
    assert 0.25 < timed["seconds"] < 1.0 and timed["good"] > 0 and timed["errors"]["total"] == 0
    assert "--keep-alive" in htstress("--connect-first", "-n", "1", url, rc=2)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    _need(eng.HTTPD_BIN, HTSTRESS)
    out = tmp_path_factory.mktemp("bench")
    r = subprocess.run([sys.executable, BENCH, "--profile", "smoke-https", "--out", str(out)],
                       capture_output=True, text=True, timeout=180, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out / "results.json") as f:
        return out, json.load(f), r.stdout


def test_smoke_https_points(smoke):
    _, doc, stdout = smoke
    runs = {(r["workload"], r["engine"]): r for r in doc["runs"] if r["suite"] == "https"}
    assert set(runs) == {(w, e) for w in ("https-small-keepalive", "https-handshake")
                         for e in ("nginx-tls", "ktcp-httpd-epoll-tls")}
    for (wl, name), r in runs.items():
        assert r["status"] == "ok", r
        assert r["rounds_ok"] == len(r["by_round"]) == 2
        for x in r["by_round"]:
            t, raw = x["tls"], x["raw"]
            assert t["resumed"] == 0 and t["handshakes"] == raw["connects"] > 0
            assert t["version"] == ("TLSv1.3" if wl == "https-handshake" else "TLSv1.2")
            assert t["group"] == "X25519"
            if wl == "https-handshake":  # one handshake per request
                assert raw["connects"] >= raw["good"] > 0 and raw["mode"] == "close"
            else:
                assert raw["connects"] == 4 and raw["mode"] == "keep-alive"
                assert raw["connect_first"]  # handshakes off the clock
    # each engine's first HTTPS run, and only that one, had an untimed
    # warm-up before it
    warmed = [(wl, name, x["round"]) for (wl, name), r in runs.items()
              for x in r["by_round"] if x.get("warmed_up_s")]
    assert sorted(warmed) == [("https-small-keepalive", e, 1)
                              for e in ("ktcp-httpd-epoll-tls", "nginx-tls")], warmed
    # the engines alternate: nginx first in round 1, the other in round 2
    order = re.findall(r"https https-small-keepalive c=4 (r\d/2) (\S+):", stdout)
    assert order == [("r1/2", "nginx-tls"), ("r1/2", "ktcp-httpd-epoll-tls"),
                     ("r2/2", "ktcp-httpd-epoll-tls"), ("r2/2", "nginx-tls")], stdout
    mem = {r["engine"]: r for r in doc["runs"] if r["suite"] == "https-memory"}
    assert set(mem) == {"nginx-tls", "ktcp-httpd-epoll-tls"}
    for r in mem.values():
        assert r["status"] == "ok" and r["raw"]["connections_idle"] == 100, r


def test_smoke_https_table_targets_and_publish(smoke, tmp_path):
    out, doc, _ = smoke
    md = (out / "results.md").read_text()
    assert "### HTTPS: req/s (× nginx over TLS)" in md
    assert "| ktcp-httpd-epoll-tls |" in md and "no session resumed" in md
    assert "ktcp-httpd on keep-alive, ktcp-httpd-epoll-tls at 4 conn." in md
    assert "ktcp-httpd idle TLS memory, ktcp-httpd-epoll-tls" in md
    bench_md = tmp_path / "BENCHMARKS.md"
    shutil.copy(os.path.join(TOP, "BENCHMARKS.md"), bench_md)
    docs = tmp_path / "docs"
    r = subprocess.run([sys.executable, BENCH, "--publish", str(out), "--docs-dir", str(docs),
                        "--bench-md", str(bench_md)], capture_output=True, text=True,
                       timeout=60, cwd=TOP)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(docs)) == ["https-host.json"]  # not bench-host.json
    pub = json.loads((docs / "https-host.json").read_text())
    assert pub["meta"]["profile"] == "smoke-https" and pub["env"] == "host"
    text = bench_md.read_text()
    section = text[text.index("<!-- bench:begin -->"):text.index("<!-- bench:end -->")]
    assert "### HTTPS: req/s" in section and f"`results/{out.name}`" in section
    import report
    for p in pub["points"]:
        assert f"| {p['engine']} | " in section and report.fmt_v(p["value"]) in section, p


def test_idle_tls_memory_at_most_nginx(docroot, tmp_path):
    """1,000 idle TLS 1.2 keep-alive connections (each served one request):
    ktcp-httpd's resident memory per connection, epoll and mn, at most
    nginx's. An idle TLS connection keeps its session but no coroutine
    stack, as a plain one (the stack was 20 KiB a connection more here)."""
    _need(eng.HTTPD_BIN)
    import bench
    import memcheck
    eng.raise_nofile()
    n = 1000
    per = {}
    for e in (eng.Nginx(str(tmp_path), tls="user"), eng.UserHttpd("epoll", str(tmp_path), tls=True),
              eng.UserHttpd("mn", str(tmp_path), tls=True)):
        class Ctx:
            pass
        ctx = Ctx()
        ctx.tmp, ctx.docroot, ctx.long_idle = str(tmp_path), docroot, True
        bench.start_engine(e, eng.free_port(), ctx)
        try:
            tls = tlscert.client_context(e.certs["ca"])
            tls.maximum_version = ssl.TLSVersion.TLSv1_2
            t0 = time.monotonic()
            m = memcheck.measure(e, n, budget_s=120, tls=tls)
            assert m["connections_idle"] == n, (e.name, m, time.monotonic() - t0)
            per[e.name] = m["rss_per_conn_kib"]
        finally:
            e.stop(check=False)
    for name in ("ktcp-httpd-epoll-tls", "ktcp-httpd-mn-tls"):
        assert per[name] <= per["nginx-tls"], per
