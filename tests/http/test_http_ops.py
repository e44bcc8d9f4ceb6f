"""Operating ktcp-httpd: the access log (Combined Log Format, reopened on
SIGUSR1), SIGHUP reloading settings under live connections, and the
counters at --status-path (plain and Prometheus). Every test runs against
each model of the user-space server; khttpd has none of these (its counters
are /proc/net/khttpd, checked in the VM suite)."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from testlib import ROOT, free_port, strace_counts
from engines import HTTPD_BIN, UserHttpd
from rawhttp import Conn, get

MODELS = ["threads", "epoll", "mn"]

# Combined Log Format, as goaccess's and awstats' "combined" presets read it
CLF = re.compile(
    r'^(?P<host>\S+) (?P<ident>\S+) (?P<user>\S+) '
    r'\[(?P<time>\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] '
    r'"(?P<request>(?:[^"\\]|\\x[0-9A-F]{2})*)" (?P<status>\d{3}) (?P<bytes>\d+|-) '
    r'"(?P<referer>(?:[^"\\]|\\x[0-9A-F]{2})*)" "(?P<agent>(?:[^"\\]|\\x[0-9A-F]{2})*)"$')

TEXT = ("ktcp serves this line again and again. " * 200).encode()


@pytest.fixture(autouse=True)
def _user_only():
    from testlib import require_kind
    require_kind("user")


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_bytes(b"hello\n")
    (root / "page.html").write_bytes(TEXT)
    for i in range(8):
        (root / f"f{i}.bin").write_bytes(bytes([i]) * 800)
    return root


class Server(UserHttpd):
    """ktcp-httpd started with any flags; stop() asserts a clean exit."""

    def __init__(self, tmp_path, model, root, *flags, nofile=None):
        super().__init__(model, str(tmp_path))
        # run as root, these servers stay root: their logs and --config
        # files live in root's private tmp, where a reload or a reopen as
        # nobody could not reach them (tests/http/test_http_security.py
        # covers --user). The listeners are open once it says so: no probe
        # connection, so the counters hold only what a test did.
        self.start(str(root), threads=2, user="root", idle_timeout_ms=None, max_conns=None,
                   gzip=None, args=flags, nofile=nofile, ready="ktcp-httpd: serving")

    def stderr(self):
        return self.log_text()


@pytest.fixture
def server(tmp_path):
    started = []

    def start(model, root, *flags, nofile=None):
        s = Server(tmp_path, model, root, *flags, nofile=nofile)
        started.append(s)
        return s
    yield start
    for s in started:
        if s.proc is not None and s.proc.returncode is None:
            s.stop()


def wait_for(cond, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def log_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii").splitlines()
    except FileNotFoundError:
        return []


def raw_request(port, data):
    with Conn(port) as c:
        c.send(data)
        return c.read_response()


# ---- the access log ----

@pytest.mark.parametrize("model", MODELS)
def test_access_log_is_combined_log_format(server, site, tmp_path, model):
    log = tmp_path / "access.log"
    srv = server(model, site, "--access-log", str(log))
    r = get(srv.port, "/a.txt", headers=[("Referer", "http://example.test/from"),
                                         ("User-Agent", 'probe "quoted" \\ back')])
    assert r.status == 200
    r = raw_request(srv.port, b"GET /nope?x=1 HTTP/1.1\r\nHost: h\r\n"
                              b"User-Agent: caf\xc3\xa9\tx\r\n\r\n")
    assert r.status == 404
    assert get(srv.port, "/a.txt", method="HEAD").status == 200
    assert raw_request(srv.port, b"GARBAGE\r\n\r\n").status == 400
    srv.stop()  # flushes every worker's buffer

    lines = log_lines(log)
    assert len(lines) == 4, lines
    parsed = []
    for line in lines:
        m = CLF.match(line)
        assert m, f"not Combined Log Format: {line!r}"
        parsed.append(m.groupdict())
    by_request = {p["request"]: p for p in parsed}
    for p in parsed:
        assert p["host"] == "127.0.0.1" and p["ident"] == "-" and p["user"] == "-"
        assert p["time"].endswith(" +0000")
        t = time.strptime(p["time"], "%d/%b/%Y:%H:%M:%S +0000")
        assert abs(time.mktime(t) - time.mktime(time.gmtime())) < 120

    ok = by_request["GET /a.txt HTTP/1.1"]
    assert (ok["status"], ok["bytes"]) == ("200", "6")
    assert ok["referer"] == "http://example.test/from"
    assert ok["agent"] == r"probe \x22quoted\x22 \x5C back"

    nf = by_request["GET /nope?x=1 HTTP/1.1"]
    assert nf["status"] == "404" and int(nf["bytes"]) > 0
    assert (nf["referer"], nf["agent"]) == ("-", r"caf\xC3\xA9\x09x")

    head = by_request["HEAD /a.txt HTTP/1.1"]
    assert (head["status"], head["bytes"]) == ("200", "0")

    bad = by_request["-"]
    assert bad["status"] == "400"
    assert (bad["referer"], bad["agent"]) == ("-", "-")


@pytest.mark.parametrize("model", MODELS)
def test_access_log_reopened_on_sigusr1(server, site, tmp_path, model):
    log = tmp_path / "access.log"
    rotated = tmp_path / "access.log.1"
    srv = server(model, site, "--access-log", str(log))
    for _ in range(3):
        assert get(srv.port, "/a.txt").status == 200
    if model == "threads":
        # a connection thread writes its lines out as its connection goes
        # idle or ends, on its own schedule: nothing a reopen can wait for
        wait_for(lambda: len(log_lines(log)) == 3, "the first three lines")
    # epoll and mn: the lines may still sit in a worker's buffer; the
    # reopen has the workers write them out to the old file first
    os.rename(log, rotated)
    srv.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: "SIGUSR1: access log reopened at " + str(log) in srv.stderr(),
             "the log reopened at its name")
    assert os.path.exists(log)
    for _ in range(2):
        assert get(srv.port, "/nope").status == 404
    wait_for(lambda: len(log_lines(log)) == 2, "two lines in the new file")
    srv.stop()
    old, new = log_lines(rotated), log_lines(log)
    assert len(old) == 3 and all('"GET /a.txt HTTP/1.1" 200 ' in l for l in old), old
    assert len(new) == 2 and all('"GET /nope HTTP/1.1" 404 ' in l for l in new), new
    assert "still logging" not in srv.stderr(), srv.stderr()


@pytest.mark.parametrize("model", MODELS)
def test_access_log_written_while_a_connection_stays_open(server, site, tmp_path, model):
    """tail -f sees a keep-alive client's requests without waiting for it
    to leave (each model flushes within about a second)."""
    log = tmp_path / "access.log"
    srv = server(model, site, "--access-log", str(log))
    with Conn(srv.port) as c:
        for _ in range(2):
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            assert c.read_response().status == 200
        wait_for(lambda: len(log_lines(log)) == 2, "two lines, connection open", timeout=3)


# ---- SIGHUP ----

def gzip_get(conn):
    conn.send(b"GET /page.html HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n")
    r = conn.read_response()
    assert r.status == 200
    return r.header("Content-Encoding")


@pytest.mark.parametrize("model", MODELS)
def test_sighup_reloads_gzip_and_log_keeping_connections(server, site, tmp_path, model):
    conf = tmp_path / "ktcp-httpd.conf"
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    conf.write_text(f"# before\nno-gzip\naccess-log {log_a}\n")
    srv = server(model, site, "--config", str(conf))
    with Conn(srv.port) as c:
        assert gzip_get(c) is None  # the file said no-gzip
        conf.write_text(f"--gzip\n  access-log   {log_b}  \n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: reloaded" in srv.stderr(), "the reload")
        # the same keep-alive connection, after the reload
        assert gzip_get(c) == "gzip"
        assert gzip_get(c) == "gzip"
    assert srv.proc.poll() is None
    with Conn(srv.port) as c2:
        assert gzip_get(c2) == "gzip"
    srv.stop()
    assert "reloaded (gzip on, access log " + str(log_b) in srv.stderr()
    a, b = log_lines(log_a), log_lines(log_b)
    assert len(a) + len(b) == 4, (a, b)
    assert all(" 200 " in l for l in a + b)
    if model == "threads":
        # the first line leaves as its thread goes idle, which may come
        # after the reload's switch
        assert len(b) >= 3, (a, b)
    else:  # written out by the reload before it switched files
        assert (len(a), len(b)) == (1, 3), (a, b)


@pytest.mark.parametrize("model", ["epoll"])
def test_sighup_with_a_bad_file_keeps_running_settings(server, site, tmp_path, model):
    conf = tmp_path / "ktcp-httpd.conf"
    conf.write_text("no-gzip\n")
    srv = server(model, site, "--config", str(conf))
    conf.write_text("no-gzip\nport 99999\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "kept the running settings" in srv.stderr(), "the refusal")
    assert "--port 99999" in srv.stderr()
    # the cache size and busy polling take a restart
    conf.write_text("gzip\ncache-size 1M\nbusy-poll-us 20\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: reloaded" in srv.stderr(), "the reload")
    assert "--cache-size changed" in srv.stderr()
    assert "--busy-poll-us changed" in srv.stderr()
    with Conn(srv.port) as c:
        assert gzip_get(c) == "gzip"


@pytest.mark.parametrize("model", ["epoll", "mn"])
def test_sighup_applies_all_or_nothing(server, site, tmp_path, model):
    """The settings a SIGHUP changes are one object, built whole: a reload
    whose site cannot be made (a --host root that is gone) names it and
    changes nothing, gzip included; replaced objects are freed while
    requests of every site go on (a burst of reloads)."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_bytes(b"other\n")
    conf = tmp_path / "ktcp-httpd.conf"
    conf.write_text(f"no-gzip\nhost other.test\nroot {other}\n")
    srv = server(model, site, "--config", str(conf))

    def other_site():
        with Conn(srv.port) as c:
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: other.test\r\n\r\n")
            return c.read_response().body

    assert other_site() == b"other\n"
    conf.write_text(f"gzip\nhost other.test\nroot {tmp_path / 'gone'}\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "kept the running settings" in srv.stderr(), "the refusal")
    assert f"--host other.test: --root {tmp_path / 'gone'}: No such file" in srv.stderr()
    assert "SIGHUP: reloaded" not in srv.stderr()
    with Conn(srv.port) as c:
        assert gzip_get(c) is None  # not half applied
    assert other_site() == b"other\n"
    conf.write_text(f"gzip\nhost other.test\nroot {other}\n")
    with Conn(srv.port) as c:
        for i in range(20):
            srv.proc.send_signal(signal.SIGHUP)
            assert gzip_get(c) in (None, "gzip")
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: other.test\r\n\r\n")
            assert c.read_response().body == b"other\n"
        wait_for(lambda: srv.stderr().count("SIGHUP: reloaded") >= 1, "a reload")
        assert gzip_get(c) == "gzip"
    assert srv.proc.poll() is None
    srv.stop()


@pytest.mark.parametrize("model", ["epoll"])
def test_sighup_reloads_expires_and_gzip_static(server, site, tmp_path, model):
    (site / "app.js").write_bytes(b"var x = 1;\n" * 50)
    (site / "app.js.gz").write_bytes(b"precompressed")
    conf = tmp_path / "ktcp-httpd.conf"
    conf.write_text("expires 60\nerror-page 404=/a.txt\n")
    srv = server(model, site, "--config", str(conf))
    ae = [("Accept-Encoding", "gzip")]
    with Conn(srv.port) as c:
        c.send(b"GET /app.js HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n")
        r = c.read_response()
        assert r.header("Cache-Control") == "max-age=60"
        assert r.body != b"precompressed"
        assert get(srv.port, "/nope").body == b"hello\n"
        conf.write_text("gzip-static\nexpires 120\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: reloaded" in srv.stderr(), "the reload")
        # the same connection, after the reload
        c.send(b"GET /app.js HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n")
        r = c.read_response()
        assert r.header("Cache-Control") == "max-age=120"
        assert r.body == b"precompressed"
    assert "gzip-static on, expires 120" in srv.stderr()
    # error pages are a site's: reloaded too (the line gone: the text)
    assert "--error-page changed" not in srv.stderr()
    assert get(srv.port, "/nope", ae).body == b"404 Not Found\n"
    srv.stop()


@pytest.mark.parametrize("model", MODELS)
def test_sighup_reloads_listings(server, site, tmp_path, model):
    """listings in the --config file: off answers 403 for a directory
    without index.html; a SIGHUP turns it on under a live connection."""
    (site / "d").mkdir()
    (site / "d" / "x.txt").write_bytes(b"x\n")
    (site / "i").mkdir()
    (site / "i" / "index.html").write_bytes(b"<p>index</p>\n")
    conf = tmp_path / "ktcp-httpd.conf"
    conf.write_text("listings off\n")
    srv = server(model, site, "--config", str(conf))
    with Conn(srv.port) as c:
        c.send(b"GET /d/ HTTP/1.1\r\nHost: h\r\n\r\nGET /i/ HTTP/1.1\r\nHost: h\r\n\r\n")
        assert c.read_response().status == 403
        assert c.read_response().body == b"<p>index</p>\n"
        conf.write_text("listings on\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: reloaded" in srv.stderr(), "the reload")
        c.send(b"GET /d/ HTTP/1.1\r\nHost: h\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and b"x.txt" in r.body
    assert "listings on," in srv.stderr()
    conf.write_text("listings maybe\n")
    srv.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "kept the running settings" in srv.stderr(), "the refusal")
    assert "--listings maybe" in srv.stderr()
    assert get(srv.port, "/d/").status == 200
    srv.stop()


def test_config_file_errors_are_named(site, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("gzip\nthreads zero\n")
    r = subprocess.run([HTTPD_BIN, "--root", str(site), "--config", str(conf)],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert f"--config {conf}: --threads zero" in r.stderr, r.stderr
    r = subprocess.run([HTTPD_BIN, "--config", str(tmp_path / "none.conf")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "none.conf: No such file" in r.stderr, r.stderr


def test_help_lists_the_operating_flags():
    out = subprocess.run([HTTPD_BIN, "--help"], capture_output=True, text=True,
                         timeout=10).stdout
    for flag in ("--access-log", "--status-path", "--config", "SIGUSR1", "SIGHUP"):
        assert flag in out, flag


# ---- counters ----

def settled(read, done, timeout=5.0):
    """Counters read until done(values) or the timeout: a worker counts a
    response as it leaves, which can trail the client's read of it on a
    busy host. The last reading either way."""
    deadline = time.monotonic() + timeout
    while True:
        v = read()
        if done(v) or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def status(port, path="/status"):
    """The plain counters, read on a connection that closes after it."""
    r = raw_request(port, f"GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode())
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("text/plain")
    values = {}
    for line in r.body.decode().splitlines():
        name, value = line.split(" ")
        values[name] = int(value)
    return values, len(r.head) + len(r.body)


KHTTPD_NAMES = ["accepted", "active", "refused", "requests", "status_1xx",
                "status_2xx", "status_3xx", "status_4xx", "status_5xx",
                "bytes_out", "cache_hits", "cache_misses", "cache_evictions",
                "cache_bytes", "cache_entries", "timeouts", "errors",
                "listings_refused", "listing_bytes", "denied", "rate_limited",
                "rate_entries", "proxy_headers", "proxy_refused"]


@pytest.mark.parametrize("model", MODELS)
def test_counters_move_with_requests(server, site, model):
    srv = server(model, site, "--status-path", "/status")
    s0, s0_len = status(srv.port)
    # /proc/net/khttpd's names and order, then the counters khttpd has no
    # use for (it has no access log to reopen, no open-file cache)
    assert list(s0) == KHTTPD_NAMES + ["log_reopen_failures", "cache_open_files"]
    n = 7
    received = 0
    with Conn(srv.port) as c:
        for _ in range(n):
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            r = c.read_response()
            assert r.status == 200 and r.body == b"hello\n"
            received += len(r.head) + len(r.body)
        c.send(b"GET /missing HTTP/1.1\r\nHost: h\r\n\r\n")
        r = c.read_response()
        assert r.status == 404
        received += len(r.head) + len(r.body)
        c.send(b"GET /f0.bin/ HTTP/1.1\r\nHost: h\r\n\r\n")  # a file as a directory
        r = c.read_response()
        received += len(r.head) + len(r.body)
        assert r.status == 404
    # a worker counts what it sent once its send returns, which can be a
    # moment after the client has the bytes (seen under load on mn)
    time.sleep(0.2)
    s1, _ = status(srv.port)
    d = {k: s1[k] - s0[k] for k in s0}
    assert d["requests"] == n + 2  # the status page itself is not counted
    assert d["status_2xx"] == n and d["status_4xx"] == 2
    assert d["status_1xx"] == d["status_3xx"] == d["status_5xx"] == 0
    assert d["accepted"] == 2  # this connection and the second status read
    # every byte written: our responses, plus the first status response
    assert d["bytes_out"] == received + s0_len
    assert d["cache_hits"] >= n - 1 and d["cache_misses"] >= 1
    assert s1["cache_entries"] >= 1 and s1["cache_bytes"] > 0
    assert d["timeouts"] == 0 and d["errors"] == 0 and d["refused"] == 0
    # two status reads in a row: nothing but accepted and bytes moved
    s2, _ = status(srv.port)
    assert s2["requests"] == s1["requests"]


def status_over(conn, path):
    """The plain counters, read over a held keep-alive connection."""
    conn.send(f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
    r = conn.read_response()
    assert r.status == 200, r
    return {k: int(v) for k, v in (l.split(" ") for l in r.body.decode().splitlines())}


@pytest.mark.parametrize("model", MODELS)
def test_active_and_refused(server, site, model):
    srv = server(model, site, "--status-path", "/st", "--max-conns", "3")
    held = [Conn(srv.port), Conn(srv.port)]
    try:
        for c in held:  # admitted: each answers
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            assert c.read_response().status == 200
        # the readiness probe's connection may take a moment to go
        wait_for(lambda: status_over(held[0], "/st")["active"] == 2, "active == 2")
        s0 = status_over(held[0], "/st")
        held.append(Conn(srv.port))
        held[2].send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
        assert held[2].read_response().status == 200
        assert status_over(held[0], "/st")["active"] == 3
        with Conn(srv.port) as fourth:  # beyond --max-conns 3
            fourth.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            assert fourth.read_response().status == 503
        s1 = status_over(held[0], "/st")
        assert s1["refused"] - s0["refused"] == 1
        assert s1["accepted"] - s0["accepted"] == 1  # the third, not the fourth
        assert s1["active"] == 3
        held.pop().close()
        wait_for(lambda: status_over(held[0], "/st")["active"] == 2, "active back to 2")
    finally:
        for c in held:
            c.close()


@pytest.mark.parametrize("model", MODELS)
def test_timeouts_counted(server, site, model):
    srv = server(model, site, "--status-path", "/status", "--idle-timeout", "300")
    s0, _ = status(srv.port)
    with Conn(srv.port) as idle:
        assert idle.closed_within(5)  # idle timeout: closed without a word
    with Conn(srv.port) as slow:
        slow.send(b"GET /a.txt HTTP/1.1\r\n")  # a head never finished
        assert slow.read_response().status == 408
    s1, _ = settled(lambda: status(srv.port),
                    lambda v: v[0]["status_4xx"] > s0["status_4xx"])
    assert s1["timeouts"] - s0["timeouts"] == 2
    assert s1["requests"] - s0["requests"] == 1  # the 408
    assert s1["status_4xx"] - s0["status_4xx"] == 1


@pytest.mark.parametrize("model", MODELS)
def test_cache_evictions_counted(server, site, model):
    srv = server(model, site, "--status-path", "/status", "--cache-size", "4096")
    s0, _ = status(srv.port)
    for i in range(8):
        assert get(srv.port, f"/f{i}.bin").status == 200
    # a worker's counts reach the status page as it flushes them, and an
    # evicted entry's bytes leave at its last put, after its response is
    # sent: both can trail the client's read of the response on a busy host
    s1, _ = settled(lambda: status(srv.port),
                    lambda v: v[0]["cache_misses"] - s0["cache_misses"] >= 8
                    and v[0]["cache_bytes"] <= 4096)
    assert s1["cache_misses"] - s0["cache_misses"] == 8
    assert s1["cache_evictions"] - s0["cache_evictions"] >= 4
    assert s1["cache_bytes"] <= 4096
    assert get(srv.port, "/f7.bin").status == 200  # the newest stays
    s2, _ = settled(lambda: status(srv.port),
                    lambda v: v[0]["cache_hits"] > s1["cache_hits"])
    assert s2["cache_hits"] - s1["cache_hits"] == 1


# The threads model's acceptor hands each connection to a thread of its own
# and can stay below the descriptor limit while the clients queue, so whether
# an accept fails there depends on timing; the event models hold every
# connection in their loops and reach it every time, as long as no request
# comes before the limit is reached (a connection whose request is already
# there is served and closed at once, freeing its descriptor): the requests
# go out once an accept has failed.
@pytest.mark.parametrize("model", ["epoll", "mn"])
def test_accept_errors_counted(server, site, model):
    """Out of descriptors, accept fails: an error, counted; the clients are
    served once descriptors are free again."""
    srv = server(model, site, "--status-path", "/status", nofile=40)
    with Conn(srv.port) as keep:  # a status connection that holds its fd
        s0 = status_over(keep, "/status")
        conns = [Conn(srv.port) for _ in range(60)]
        try:
            full = settled(lambda: status_over(keep, "/status"),
                           lambda v: v["errors"] > s0["errors"], timeout=10)
            assert full["errors"] > s0["errors"], (s0, full)
            for c in conns:
                c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            for c in conns:
                assert c.read_response(timeout=15).status in (200, 500)
        finally:
            for c in conns:
                c.close()
        s1 = settled(lambda: status_over(keep, "/status"),
                     lambda v: v["requests"] - s0["requests"] >= 60)
    assert s1["errors"] > s0["errors"], (s0, s1)
    assert s1["accepted"] - s0["accepted"] == 60
    assert s1["requests"] - s0["requests"] == 60


@pytest.mark.parametrize("model", MODELS)
def test_lingering_close_ends_after_an_idle_wait(server, site, model):
    """A close after an error lingers for a moment, then lets go of the
    connection, even when the client keeps its side open, and even when
    the connection sat idle before (its idle deadline is far later)."""
    srv = server(model, site, "--status-path", "/status", "--idle-timeout", "30000")
    with Conn(srv.port) as keep, Conn(srv.port) as c:
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
        assert c.read_response().status == 200
        time.sleep(0.3)  # parked idle: an entry for 30 s from now
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n")
        assert c.read_response().status == 400
        # the server shut its side; it must close within its linger time
        # (about a second), not at the idle deadline
        t0 = time.monotonic()
        while status_over(keep, "/status")["active"] > 1:
            assert time.monotonic() - t0 < 5, "lingering close held the connection"
            time.sleep(0.1)


PROM_SAMPLE = re.compile(r'^([a-z_]+)(\{class="[1-5]xx"\})? (\d+)$')


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("path", ["/_status/metrics", "/_status?format=prometheus",
                                  "/_status?a=b&format=prometheus"])
def test_prometheus_exposition(server, site, model, path):
    srv = server(model, site, "--status-path", "/_status")
    for _ in range(3):
        assert get(srv.port, "/a.txt").status == 200
    assert get(srv.port, "/nope").status == 404
    # A worker counts a request as its response leaves: the threads model's
    # last count can trail the client's read by a moment on a busy host.
    deadline = time.monotonic() + 5
    while True:
        r = get(srv.port, path)
        if b"ktcp_httpd_requests_total 4" in r.body or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert r.status == 200
    assert r.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    helps, types, samples = {}, {}, {}
    for line in r.body.decode().splitlines():
        if line.startswith("# HELP "):
            name, text = line[7:].split(" ", 1)
            assert text, line
            helps[name] = text
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            types[name] = kind
        else:
            m = PROM_SAMPLE.match(line)
            assert m, f"not an exposition sample: {line!r}"
            assert m.group(1) in types, f"{m.group(1)} sampled before its TYPE"
            samples[m.group(1) + (m.group(2) or "")] = int(m.group(3))
    assert set(helps) == set(types)
    for name, kind in types.items():
        assert name.startswith("ktcp_httpd_")
        assert kind == ("counter" if name.endswith("_total") else "gauge"), name
    assert types["ktcp_httpd_active"] == "gauge"
    assert samples["ktcp_httpd_requests_total"] == 4
    assert samples['ktcp_httpd_responses_total{class="2xx"}'] == 3
    assert samples['ktcp_httpd_responses_total{class="4xx"}'] == 1
    assert samples["ktcp_httpd_active"] >= 1
    assert samples["ktcp_httpd_accepted_total"] >= 5
    for n in ("refused", "bytes_out", "cache_hits", "cache_misses",
              "cache_evictions", "timeouts", "errors"):
        assert f"ktcp_httpd_{n}_total" in samples, n
    assert "ktcp_httpd_cache_bytes" in samples and "ktcp_httpd_cache_entries" in samples


@pytest.mark.parametrize("model", ["epoll"])
def test_status_path_is_off_by_default_and_exact(server, site, model):
    srv = server(model, site)
    assert get(srv.port, "/status").status == 404
    srv2 = server(model, site, "--status-path", "/status")
    assert get(srv2.port, "/status/").status == 404  # exact path only
    assert get(srv2.port, "/statusx").status == 404
    assert get(srv2.port, "/status", method="HEAD").status == 200
    r = raw_request(srv2.port, b"POST /status HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
    assert r.status == 405


SOCKET_ACTIVATE = "/usr/bin/systemd-socket-activate"


@pytest.mark.parametrize("model", MODELS)
def test_socket_activation(site, tmp_path, model):
    """Started by systemd's socket activation (LISTEN_PID/LISTEN_FDS, the
    socket on descriptor 3), ktcp-httpd serves that socket and binds
    nothing of its own; at SIGTERM it exits cleanly and leaves the socket
    open, as systemd keeps it for the next start."""
    if not os.path.exists(SOCKET_ACTIVATE):
        pytest.fail(f"{SOCKET_ACTIVATE} missing (Debian's systemd package)")
    port, own = free_port(), free_port()
    err = open(tmp_path / "err", "w")
    p = subprocess.Popen([SOCKET_ACTIVATE, "-l", f"127.0.0.1:{port}", HTTPD_BIN,
                          "--root", str(site), "--bind", "127.0.0.1", "--port", str(own),
                          "--model", model, "--threads", "2"],
                         stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 10
        while True:  # the socket exists once systemd-socket-activate listens
            try:
                r = get(port, "/a.txt")
                break
            except OSError:
                assert p.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        assert r.status == 200 and r.body == b"hello\n"
        for _ in range(20):
            assert get(port, "/a.txt").status == 200
        with Conn(port) as c:  # keep-alive on the passed socket
            for _ in range(3):
                c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
                assert c.read_response().status == 200
        log = open(tmp_path / "err").read()
        assert "on the socket passed by systemd" in log, log
        with pytest.raises(OSError):  # --bind/--port were not used
            get(own, "/a.txt")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 0, open(tmp_path / "err").read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        err.close()


@pytest.mark.parametrize("model", MODELS)
def test_socket_activation_leaves_the_socket_usable(site, tmp_path, model):
    """systemd keeps the listening socket across restarts: after ktcp-httpd
    stops, the socket must still accept (no shutdown of a socket it shares),
    and a second ktcp-httpd serves the clients queued meanwhile."""
    import socket as so
    lsock = so.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    os.set_inheritable(lsock.fileno(), True)
    script = (f"exec 3<&{lsock.fileno()}; LISTEN_PID=$$ LISTEN_FDS=1 exec {HTTPD_BIN} "
              f"--root {site} --model {model} --threads 2 --port {free_port()}")

    def start():
        p = subprocess.Popen(["bash", "-c", script], pass_fds=[lsock.fileno()],
                             stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err", "a"))
        assert get(port, "/a.txt").status == 200
        return p

    p = start()
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=15) == 0
    with Conn(port) as c:  # queued by the kernel while nobody serves
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        p = start()
        try:
            assert c.read_response(timeout=10).status == 200
        finally:
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=15) == 0
    lsock.close()


def test_threads_model_reuses_its_threads(server, site, tmp_path):
    """The threads model keeps a thread per live connection, not per
    connection made: 100 connections one after another run on threads it
    already has (counted with strace: at most a handful of clone calls)."""
    srv = server("threads", site)
    assert get(srv.port, "/a.txt").status == 200  # a first thread exists
    out = tmp_path / "strace"
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=clone,clone3",
                               "-o", str(out), "-p", str(srv.proc.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # attached to every thread
        for _ in range(100):
            assert get(srv.port, "/a.txt").status == 200
    finally:
        tracer.terminate()
        tracer.wait(timeout=10)
    clones = [l for l in out.read_text().splitlines() if "clone" in l and "= " in l]
    assert len(clones) <= 5, clones[:10]


@pytest.mark.parametrize("model", MODELS)
def test_keepalive_request_costs_three_system_calls(server, site, tmp_path, model):
    """One keep-alive request is one read, one send and one wait: after a
    response, a connection whose last read drained the socket goes idle
    without a read that would fail with EAGAIN (counted with strace)."""
    srv = server(model, site)
    out = tmp_path / "strace"
    tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(out), "-p", str(srv.proc.pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n = 300
    try:
        time.sleep(1.0)  # attached to every thread
        with Conn(srv.port) as c:
            for _ in range(n):
                c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
                assert c.read_response().body == b"hello\n"
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=10)
    calls = {}
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[-1].isidentifier() and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    assert calls.get("recvfrom", 0) <= n * 1.05, calls
    assert calls.get("sendmsg", 0) + calls.get("writev", 0) <= n * 1.05, calls


@pytest.mark.parametrize("model", MODELS)
def test_listing_row_costs_one_stat(server, site, tmp_path, model):
    """A listing looks each row up with one fstatat beneath its directory;
    only a symlink is followed (beneath the root) to show what it points
    to. Before, every row was an openat2, an fstat and a close: 300 system
    calls for 100 names."""
    d = site / "many"
    d.mkdir()
    for i in range(100):
        (d / f"n{i:03d}.txt").write_bytes(b"x" * (i + 1))
    (d / "inside").symlink_to("n099.txt")  # beneath the root: its target's size
    (d / "outside").symlink_to("/" + "x" * 40)  # dangling: the link's own size
    srv = server(model, site)
    reps = 5
    bodies = []

    def work():
        for _ in range(reps):
            r = get(srv.port, "/many/")
            assert r.status == 200
            bodies.append(r.body.decode())

    calls = strace_counts(srv.proc.pid, work)
    text = bodies[0]
    for i in range(100):
        assert f"n{i:03d}.txt</a></td><td>{i + 1}<" in text, i
    assert "inside</a></td><td>100<" in text
    assert "outside</a></td><td>41<" in text
    assert calls.get("newfstatat", 0) >= 102 * reps, calls
    # the directory, its index.html, the two symlinks: a handful, not 102
    assert calls.get("openat2", 0) <= 6 * reps, calls
    assert calls.get("close", 0) <= 8 * reps, calls


def test_sighup_reloads_free_the_strings_of_the_file(site, tmp_path):
    """Each reload reads --config's file into new strings; the ones the
    reload before left behind are freed (memcheck: nothing definitely lost
    after 12 reloads and a stop)."""
    import shutil
    if not shutil.which("valgrind"):
        pytest.skip("valgrind not installed (scripts/deps)")
    conf = tmp_path / "ktcp-httpd.conf"
    conf.write_text(f"gzip\naccess-log {tmp_path / 'a.log'}\nexpires 60\nthreads 1\n")
    port = free_port()
    out = tmp_path / "memcheck.txt"
    # Valgrind 3.19 fails openat2 (ENOSYS), which a start checks for and
    # refuses: the bench's shim turns it into openat (tools/bench/vg-openat2.c)
    shim = tmp_path / "vg-openat2.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(shim),
                    os.path.join(ROOT, "tools/bench/vg-openat2.c"),
                    "-ldl"], check=True, timeout=120)
    with open(out, "w") as f:
        proc = subprocess.Popen(
            ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
             "--error-exitcode=99", HTTPD_BIN, "--model", "threads", "--root", str(site),
             "--config", str(conf), "--port", str(port), "--user", "root"],
            stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, LD_PRELOAD=str(shim)))
    try:
        text = lambda: out.read_text(errors="replace")
        wait_for(lambda: "ktcp-httpd: serving" in text(), "the start", timeout=60)
        for i in range(1, 13):
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: text().count("SIGHUP: reloaded") == i, f"reload {i}", timeout=30)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = text()
    assert "definitely lost: 0 bytes" in report or "no leaks are possible" in report, report[-3000:]
    assert rc == 0, report[-3000:]


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("model", ["epoll", "mn"])
def test_stalled_listings_share_one_table(server, site, tmp_path, model):
    """200 connections GET a 20,000-name directory and never read: one
    sorted name table in the cache (cache_bytes) serves them all, each
    listing is charged its buffers alone (listing_bytes), and the server's
    RSS grows by less than 100 KiB a connection (with a table per
    connection: about 625 KiB)."""
    crowd = site / "crowd"
    crowd.mkdir()
    for i in range(20000):
        os.mknod(crowd / f"entry-{i:05d}-crowded.txt")
    srv = server(model, site, "--status-path", "/_status")
    n = 200
    r0 = vm_rss(srv.proc.pid)
    held = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(60)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(b"GET /crowd/ HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
        for s in held:
            assert s.recv(16, socket.MSG_PEEK).startswith(b"HTTP/1.1 200")
        time.sleep(1)
        grown = vm_rss(srv.proc.pid) - r0
        c, _ = status(srv.port, "/_status")
    finally:
        for s in held:
            s.close()
    with open(os.path.join(os.path.dirname(HTTPD_BIN), "httpd-memory.txt"), "a") as f:
        f.write(f"ktcp-httpd --model {model}: {n} stalled listings of a 20000-name "
                f"directory: RSS +{grown >> 10} KiB ({grown / n / 1024:.1f} KiB per "
                f"connection), listing_bytes {c.get('listing_bytes')}, "
                f"cache_bytes {c['cache_bytes']}\n")
    assert c["listings_refused"] == 0
    assert 0 < c["listing_bytes"] <= n * 32 * 1024, c
    assert c["cache_bytes"] > 20000 * 28, c  # the one table
    assert grown < n * 100 * 1024, f"RSS +{grown >> 10} KiB for {n} stalled listings"
