"""The load generators against real servers on 127.0.0.1.

htstress runs against a private nginx (temp config, own prefix, access log
off) and small Python servers that send chunked bodies, close or reset
connections, hang, or send garbage; lat runs each of its modes; echo-bench
runs against a threaded Python echo server and a deliberately corrupting one.
Every run is bounded by the tools' own count, duration or timeout flags.
"""
import json
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import threading
import time

import pytest

from testlib import BUILD, ROOT, free_port, run, wait_port

HTSTRESS = os.path.join(BUILD, "htstress")
LAT = os.path.join(BUILD, "lat")
ECHO_BENCH = os.path.join(BUILD, "echo-bench")
SMALL_BODY = b"hello from nginx\n"


def tool(cmd, expect_rc=0, timeout=60):
    r = run(cmd, check=False, timeout=timeout)
    assert r.returncode == expect_rc, (
        f"{cmd} exited {r.returncode}, expected {expect_rc}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def htstress_json(*args, expect_rc=0):
    r = tool([HTSTRESS, "--json", *args], expect_rc)
    return json.loads(r.stdout)


def assert_consistent(j):
    """Counts add up; percentiles are ordered."""
    errors = j["errors"]
    assert errors["total"] == sum(v for k, v in errors.items() if k != "total")
    assert j["requests"] == j["good"] + j["bad"] + errors["total"]
    assert j["good"] + j["bad"] == sum(j["status"].values())
    lat = j["latency_us"]
    assert lat["count"] == j["good"] + j["bad"]
    if lat["count"]:
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"]


# --------------------------------------------------------------- servers

def ipv6_loopback_works():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A private nginx on a free loopback port; yields its port."""
    if not shutil.which("nginx"):
        pytest.skip("nginx is not installed (scripts/deps installs it)")
    prefix = tmp_path_factory.mktemp("nginx")
    www = prefix / "www"
    www.mkdir()
    (www / "index.html").write_bytes(SMALL_BODY)
    (www / "big.txt").write_bytes(b"compressible line of text\n" * 4000)
    port = free_port()
    v6 = f"listen [::1]:{port};" if ipv6_loopback_works() else ""
    # As root, workers would drop to nobody, who cannot read pytest's 0700 tmp.
    user = "user root;" if os.geteuid() == 0 else ""
    conf = prefix / "nginx.conf"
    conf.write_text(f"""
{user}
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    gzip on;
    gzip_min_length 1;
    gzip_types text/plain;
    server {{
        listen 127.0.0.1:{port};
        {v6}
        root {www};
    }}
}}
""")
    proc = subprocess.Popen(["nginx", "-c", str(conf), "-p", str(prefix), "-e", f"{prefix}/error.log",
                             "-g", "daemon off;"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc=proc)
        yield port
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ServerThread:
    """A socketserver on a free loopback port, served from a thread."""

    def __init__(self, handler, **attrs):
        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True
            request_queue_size = 1024
        self.server = Server(("127.0.0.1", 0), handler)
        for k, v in attrs.items():
            setattr(self.server, k, v)
        self.server.connections = 0
        self.server.lock = threading.Lock()
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def count_connection(server):
    with server.lock:
        server.connections += 1


def read_requests(sock, buf):
    """Read until at least one complete request head is buffered; return
    (heads, rest) or (None, rest) at EOF."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None, buf
        buf += data
    *heads, rest = buf.split(b"\r\n\r\n")
    return heads, rest


class ChunkedHandler(socketserver.BaseRequestHandler):
    """HTTP/1.1 keep-alive; chunked bodies with an extension and a trailer.
    /close answers HTTP/1.0 with a body delimited by closing."""

    def handle(self):
        count_connection(self.server)
        buf = b""
        while True:
            heads, buf = read_requests(self.request, buf)
            if heads is None:
                return
            out = b""
            for head in heads:
                self.server.last_head = head
                if head.split(b" ")[1] == b"/close":
                    self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close")
                    return
                out += (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"5\r\nhello\r\n"
                        b"7;ext=1\r\n, world\r\n"
                        b"1000\r\n" + b"x" * 0x1000 + b"\r\n"
                        b"0\r\nX-Trailer: yes\r\n\r\n")
            self.request.sendall(out)


class RudeHandler(socketserver.BaseRequestHandler):
    """Reads a request, then closes (FIN) or resets (RST) without answering,
    alternating by connection."""

    def handle(self):
        count_connection(self.server)
        with self.server.lock:
            n = self.server.connections
        self.request.settimeout(2)
        try:
            self.request.recv(4096)
        except OSError:
            pass
        if n % 2:
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.request.close()


class SilentHandler(socketserver.BaseRequestHandler):
    """Accepts and never answers (until the client goes away)."""

    def handle(self):
        self.request.settimeout(10)
        try:
            while self.request.recv(4096):
                pass
        except OSError:
            pass


class GarbageHandler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(2)
        try:
            self.request.recv(4096)
            self.request.sendall(b"SPDY/9 banana\r\n\r\n")
        except OSError:
            pass


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            if self.server.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            self.request.sendall(data)


@pytest.fixture
def server():
    """Factory: server(Handler, **attrs) -> ServerThread, closed afterwards."""
    started = []

    def start(handler, **attrs):
        s = ServerThread(handler, **attrs)
        started.append(s)
        return s
    yield start
    for s in started:
        s.close()


@pytest.fixture(scope="module")
def echo_server():
    s = ServerThread(EchoHandler, corrupt=False)
    yield s
    s.close()


# --------------------------------------------------------------- help / usage

@pytest.mark.parametrize("binary,flags", [
    (HTSTRESS, ["--requests", "--duration", "--concurrency", "--threads", "--keep-alive", "--pipeline",
                "--rate", "--header", "--timeout", "--tls-version", "--tls-groups", "--json",
                "--progress", "--sched-batch", "--help"]),
    (LAT, ["--size", "--count", "--duration", "--warmup", "--same-core", "--cross-core", "--timeout",
           "--json", "--help"]),
    (ECHO_BENCH, ["--host", "--port", "--clients", "--rounds", "--min-len", "--max-len", "--seed",
                  "--timeout", "--samples", "--plot", "--json", "--help"]),
    (os.path.join(BUILD, "floor"), ["--root", "--port", "--bind", "--threads", "--version",
                                    "--help"]),
])
def test_help_lists_every_flag(binary, flags):
    out = tool([binary, "--help"]).stdout
    for flag in flags:
        assert flag in out, f"{flag} missing from {binary} --help"
    assert "default" in out


@pytest.mark.parametrize("args,complaint", [
    (["-n", "abc", "http://127.0.0.1:1/"], "--requests"),
    (["-p", "4", "http://127.0.0.1:1/"], "--keep-alive"),
    (["ftp://127.0.0.1:1/"], "http:// and https://"),
    (["-n", "5", "-d", "1", "http://127.0.0.1:1/"], "either"),
    (["--threads"], "requires an argument"),
])
def test_htstress_usage_errors(args, complaint):
    r = tool([HTSTRESS, *args], expect_rc=2)
    assert complaint in r.stderr


# --------------------------------------------------------------- htstress vs nginx

def test_htstress_connection_per_request(nginx):
    j = htstress_json("-n", "600", "-c", "8", "-t", "2", f"http://127.0.0.1:{nginx}/index.html")
    assert j["mode"] == "close" and j["threads"] == 2 and j["connections"] == 8
    assert j["good"] == 600 and j["bad"] == 0 and j["errors"]["total"] == 0
    assert j["connects"] == 600  # one connection per request
    assert_consistent(j)


def test_htstress_keep_alive_reuses_connections(nginx):
    j = htstress_json("-k", "-n", "3000", "-c", "10", "--threads", "2",
                      f"http://127.0.0.1:{nginx}/index.html")
    assert j["good"] == 3000 and j["errors"]["total"] == 0
    # nginx serves 1000 requests per connection by default: 300 each fit in one.
    assert j["connects"] == 10
    assert j["threads"] == 2  # --threads takes its value
    assert_consistent(j)


def test_htstress_pipelined(nginx):
    j = htstress_json("-k", "-p", "16", "-n", "5000", "-c", "4", "-t", "2",
                      f"http://127.0.0.1:{nginx}/index.html")
    assert j["pipeline"] == 16
    assert j["good"] == 5000 and j["bad"] == 0 and j["errors"]["total"] == 0
    # 5000 over 4 connections passes nginx's 1000-per-connection limit: the
    # requests it announced it would not answer were sent again elsewhere.
    assert j["connects"] >= 5
    assert j["bytes_read"] > 5000 * len(SMALL_BODY)
    assert_consistent(j)


def test_htstress_404_counted_bad(nginx):
    for mode in ([], ["-k"]):
        j = htstress_json(*mode, "-n", "200", "-c", "4", f"http://127.0.0.1:{nginx}/no/such/file")
        assert j["good"] == 0 and j["bad"] == 200 and j["status"]["4xx"] == 200
        assert j["errors"]["total"] == 0
        assert_consistent(j)


def test_htstress_gzip_chunked_from_nginx(nginx):
    """nginx compresses on the fly and sends the result chunked."""
    j = htstress_json("-k", "-n", "400", "-c", "4", "-H", "Accept-Encoding: gzip",
                      f"http://127.0.0.1:{nginx}/big.txt")
    assert j["good"] == 400 and j["errors"]["total"] == 0 and j["connects"] == 4
    # compressed: far fewer bytes than 400 x 104000
    assert j["bytes_read"] < 400 * 20000
    assert_consistent(j)


@pytest.mark.skipif(not ipv6_loopback_works(), reason="no IPv6 loopback on this machine")
def test_htstress_ipv6(nginx):
    j = htstress_json("-k", "-n", "300", "-c", "3", f"http://[::1]:{nginx}/index.html")
    assert j["good"] == 300 and j["errors"]["total"] == 0


def test_htstress_by_duration(nginx):
    j = htstress_json("-k", "-d", "1", "-c", "4", f"http://127.0.0.1:{nginx}/index.html")
    assert j["good"] > 0 and j["errors"]["total"] == 0
    assert 0.9 < j["seconds"] < 5
    assert_consistent(j)


def thread_policies(pid):
    """Scheduling policy of every thread of pid (field 41 of its stat)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out.append(int(f.read().rsplit(")", 1)[1].split()[38]))
        except (OSError, IndexError):
            pass
    return out


@pytest.mark.parametrize("batch", [True, False])
def test_htstress_sched_batch_covers_every_thread(nginx, batch):
    """--sched-batch puts the main thread and every worker under SCHED_BATCH
    (3), so that the benches' client never preempts a server on a shared
    CPU; without it they stay SCHED_OTHER (0)."""
    args = [HTSTRESS, "--json", "-k", "-d", "1.5", "-c", "4", "-t", "3",
            *(["--sched-batch"] if batch else []), f"http://127.0.0.1:{nginx}/index.html"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and len(seen) < 4:  # main + 3 workers
            time.sleep(0.05)
            seen = thread_policies(proc.pid)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert len(seen) == 4 and set(seen) == {3 if batch else 0}, seen
    j = json.loads(out)
    assert j["sched"] == ("batch" if batch else "other")
    assert j["good"] > 0 and j["errors"]["total"] == 0


def test_htstress_rate_limit(nginx):
    j = htstress_json("-k", "-n", "100", "-c", "2", "-t", "2", "--rate", "200",
                      f"http://127.0.0.1:{nginx}/index.html")
    assert j["good"] == 100
    # 100 requests at 200/s cannot finish in less than about half a second.
    assert j["seconds"] >= 0.45


def test_htstress_human_summary(nginx):
    r = tool([HTSTRESS, "-k", "-n", "100", "-c", "2", f"http://127.0.0.1:{nginx}/index.html"])
    assert "good 100" in r.stdout and "p99.9" in r.stdout and "req/s" in r.stdout
    assert r.stderr == ""  # no progress line when stderr is not a tty
    r = tool([HTSTRESS, "--progress", "-k", "-d", "1.5", "-c", "2", f"http://127.0.0.1:{nginx}/index.html"])
    assert "req/s" in r.stderr


# --------------------------------------------------------------- htstress vs odd servers

def test_htstress_chunked_keep_alive(server):
    s = server(ChunkedHandler)
    j = htstress_json("-k", "-n", "300", "-c", "3", "-p", "2", "-H", "Accept-Encoding: gzip",
                      f"http://127.0.0.1:{s.port}/chunked")
    assert j["good"] == 300 and j["errors"]["total"] == 0
    # Every chunked body was framed right, or the connections would have broken.
    assert s.server.connections == 3 and j["connects"] == 3
    assert b"Accept-Encoding: gzip" in s.server.last_head
    assert s.server.last_head.startswith(b"GET /chunked HTTP/1.1\r\nHost: 127.0.0.1:")


def test_htstress_body_until_close(server):
    s = server(ChunkedHandler)
    j = htstress_json("-n", "50", "-c", "2", f"http://127.0.0.1:{s.port}/close")
    assert j["good"] == 50 and j["errors"]["total"] == 0
    assert s.server.last_head.startswith(b"GET /close HTTP/1.0\r\n")
    # keep-alive asked, but the server closes after each: reconnect, no errors
    j = htstress_json("-k", "-n", "50", "-c", "2", f"http://127.0.0.1:{s.port}/close")
    assert j["good"] == 50 and j["errors"]["total"] == 0


@pytest.mark.parametrize("keep_alive", [[], ["-k", "-p", "3"]])
def test_htstress_counts_closes_and_resets(server, keep_alive):
    s = server(RudeHandler)
    r = tool([HTSTRESS, "--json", *keep_alive, "-n", "60", "-c", "4", "-t", "2", "--timeout", "3000",
              f"http://127.0.0.1:{s.port}/"])
    j = json.loads(r.stdout)
    e = j["errors"]
    assert j["good"] == 0 and j["bad"] == 0
    assert e["total"] == 60  # every request ended exactly once, as an error
    assert e["reset"] > 0 and e["closed"] + e["hup"] > 0
    assert e["timeout"] == 0
    assert_consistent(j)


def test_htstress_timeout(server):
    s = server(SilentHandler)
    j = htstress_json("-k", "-n", "4", "-c", "2", "--timeout", "300", f"http://127.0.0.1:{s.port}/")
    assert j["errors"]["timeout"] == 4 and j["errors"]["total"] == 4
    assert j["seconds"] < 5


def test_htstress_garbage_is_a_parse_error(server):
    s = server(GarbageHandler)
    j = htstress_json("-n", "10", "-c", "2", f"http://127.0.0.1:{s.port}/")
    assert j["errors"]["parse"] == 10 and j["good"] == 0


def test_htstress_connection_refused():
    port = free_port()  # nothing listens there
    for mode in ([], ["-k"]):
        j = htstress_json(*mode, "-n", "20", "-c", "4", f"http://127.0.0.1:{port}/")
        assert j["errors"]["connect"] == 20 and j["good"] == 0


# --------------------------------------------------------------- lat

@pytest.mark.parametrize("mode", ["pipe", "unix", "tcp"])
@pytest.mark.parametrize("pin", [[], ["--same-core"], ["--cross-core"]])
def test_lat_modes(mode, pin):
    if pin == ["--cross-core"] and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("--cross-core needs two CPUs")
    r = tool([LAT, "--json", "-n", "2000", *pin, mode])
    j = json.loads(r.stdout)
    assert j["mode"] == mode and j["count"] == 2000 and j["size"] == 1
    assert j["pinning"] == (pin[0][2:] if pin else "unpinned")
    lat = j["latency_us"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["p50"] < 10000  # a local round trip is not 10 ms


def test_lat_echo_and_size(echo_server):
    r = tool([LAT, "-s", "4096", "-n", "500", f"echo", f"127.0.0.1:{echo_server.port}"])
    assert "500 round trips of 4096 B" in r.stdout and "p50" in r.stdout and "p99" in r.stdout


def test_lat_echo_detects_corruption(server):
    s = server(EchoHandler, corrupt=True)
    r = tool([LAT, "-n", "10", "echo", f"127.0.0.1:{s.port}"], expect_rc=1)
    assert "different bytes" in r.stderr


def test_lat_echo_refused_and_usage():
    r = tool([LAT, "echo", f"127.0.0.1:{free_port()}"], expect_rc=3)
    assert "connect" in r.stderr and "refused" in r.stderr
    assert "unknown mode" in tool([LAT, "carrier-pigeon"], expect_rc=2).stderr
    assert "HOST:PORT" in tool([LAT, "echo"], expect_rc=2).stderr


def test_lat_duration_bounds_the_run():
    r = tool([LAT, "--json", "-n", "100000000", "-d", "0.3", "pipe"])
    j = json.loads(r.stdout)
    assert 0 < j["count"] < 100000000 and j["seconds"] < 3


# --------------------------------------------------------------- echo-bench

def test_echo_bench_many_clients_large_messages(echo_server, tmp_path):
    samples = tmp_path / "samples.csv"
    plot = tmp_path / "latency.png"
    r = tool([ECHO_BENCH, "--json", "--port", str(echo_server.port), "--clients", "200", "--rounds", "5",
              "--min-len", "1", "--max-len", "70000", "--samples", str(samples), "--plot", str(plot)])
    j = json.loads(r.stdout)
    assert j["connected"] == 200 and j["failed_clients"] == 0
    assert j["ok"] == 1000 and j["mismatches"] == 0
    assert j["latency_us"]["count"] == 1000
    lat = j["latency_us"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    rows = samples.read_text().splitlines()
    assert rows[0] == "length_bytes,latency_ns" and len(rows) == 1001
    lengths = [int(row.split(",")[0]) for row in rows[1:]]
    assert min(lengths) >= 1 and max(lengths) <= 70000 and max(lengths) > 10000
    assert sum(lengths) == j["bytes_echoed"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_echo_bench_seed_is_reproducible(echo_server, tmp_path):
    def lengths(seed, name):
        path = tmp_path / name
        tool([ECHO_BENCH, "--port", str(echo_server.port), "--clients", "5", "--rounds", "20",
              "--max-len", "5000", "--seed", str(seed), "--samples", str(path)])
        return [row.split(",")[0] for row in path.read_text().splitlines()[1:]]
    assert lengths(7, "a.csv") == lengths(7, "b.csv")
    assert lengths(7, "a.csv") != lengths(8, "c.csv")


def test_echo_bench_plain_samples(echo_server, tmp_path):
    samples = tmp_path / "samples.txt"
    r = tool([ECHO_BENCH, "--port", str(echo_server.port), "--clients", "10", "--rounds", "3",
              "--samples", str(samples)])
    assert "30 ok, 0 mismatches" in r.stdout and "p99" in r.stdout
    values = [int(v) for v in samples.read_text().split()]
    assert len(values) == 30 and all(v > 0 for v in values)


def test_echo_bench_detects_corruption(server):
    s = server(EchoHandler, corrupt=True)
    r = tool([ECHO_BENCH, "--json", "--port", str(s.port), "--clients", "20", "--rounds", "3",
              "--max-len", "3000"], expect_rc=1)
    j = json.loads(r.stdout)
    assert j["mismatches"] == 60 and j["ok"] == 0
    assert "differed" in r.stderr


def test_echo_bench_connect_failures():
    r = tool([ECHO_BENCH, "--json", "--port", str(free_port()), "--clients", "50", "--rounds", "2"],
             expect_rc=1)
    j = json.loads(r.stdout)
    assert j["failed_clients"] == 50 and j["errors"]["connect"] == 50 and j["connected"] == 0


def test_echo_bench_closed_by_server(server):
    s = server(RudeHandler)
    r = tool([ECHO_BENCH, "--json", "--port", str(s.port), "--clients", "10", "--rounds", "2"], expect_rc=1)
    j = json.loads(r.stdout)
    assert j["failed_clients"] == 10 and j["errors"]["reset"] + j["errors"]["closed"] == 10


def test_echo_bench_against_ktcp_echo_if_built():
    """The real user echo server, when its binary is built."""
    binary = os.path.join(BUILD, "ktcp-echo")
    if not os.access(binary, os.X_OK):
        pytest.skip("build/ktcp-echo not built")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(port, proc=proc)
        r = tool([ECHO_BENCH, "--json", "--port", str(port), "--clients", "100", "--rounds", "5",
                  "--max-len", "70000"])
        j = json.loads(r.stdout)
        assert j["ok"] == 500 and j["mismatches"] == 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("program", ["hist-test", "http-response-test"])
def test_c_unit_programs(program):
    """The C unit tests (also run by make check-unit, on tests/unit/unit.h:
    "N passed, 0 failed")."""
    out = tool([os.path.join(BUILD, program)]).stdout
    assert ", 0 failed\n" in out and not out.startswith("0 passed"), out


# --------------------------------------------------------------- floor

def recv_until_close(s):
    data = b""
    while True:
        b = s.recv(1 << 16)
        if not b:
            return data
        data += b


def test_floor_answers(tmp_path):
    """build/floor (the bench's reference server): fixed bytes for a small
    file on a kept-alive connection, pipelined heads, a head that arrives
    in pieces, HTTP/1.0 answered and closed, 1 MiB by sendfile byte for
    byte (to htstress too), 404 for what is not at the top of the root."""
    import engines  # tools/ is on sys.path (testlib)
    small = b"Hello, ktcp!\n"
    big = bytes((i * 131 + 7) % 251 for i in range(1 << 20))
    (tmp_path / "small.txt").write_bytes(small)
    (tmp_path / "big.bin").write_bytes(big)
    (tmp_path / "sub").mkdir()
    e = engines.Floor(str(tmp_path))
    assert e.unavailable() is None, e.unavailable()
    e.start(str(tmp_path), threads=2)
    try:
        want = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + small
        with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
            req = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n"
            s.sendall(req)
            assert s.recv(4096) == want
            s.sendall(req * 3)  # pipelined
            got = b""
            while len(got) < 3 * len(want):
                got += s.recv(4096)
            assert got == want * 3
            for piece in (b"GET /small", b".txt HTTP/1.1\r\n", b"Host: x\r\n", b"\r\n"):
                s.sendall(piece)
                time.sleep(0.02)
            assert s.recv(4096) == want
            s.sendall(b"GET /sub HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n")
            miss = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
            got = b""
            while len(got) < 2 * len(miss):
                got += s.recv(4096)
            assert got == miss * 2
        with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
            s.sendall(b"GET /small.txt HTTP/1.0\r\n\r\n")
            assert recv_until_close(s) == (b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n"
                                           b"Connection: close\r\n\r\n" + small)
        with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
            s.sendall(b"GET /big.bin HTTP/1.0\r\n\r\n")
            head, _, body = recv_until_close(s).partition(b"\r\n\r\n")
            assert head.split(b"\r\n")[:2] == [b"HTTP/1.1 200 OK", b"Content-Length: 1048576"]
            assert body == big
        for args, path, n in ((["-k"], "/small.txt", 2000), ([], "/small.txt", 300),
                              (["-k"], "/big.bin", 40)):
            j = htstress_json("-n", str(n), "-c", "10", *args,
                              f"http://127.0.0.1:{e.port}{path}")
            assert j["good"] == n and j["errors"]["total"] == 0, j
            assert j["bytes_read"] >= n * (13 if path == "/small.txt" else len(big))
        assert e.alive()
    finally:
        e.stop()


def test_floor_http_shuts_and_pads_as_ktcp_httpd(tmp_path):
    """floor --shutdown --pad N (the floor-http engine): an HTTP/1.0 answer
    is as long as ktcp-httpd's for the same file (an X-Floor-Pad header of
    N bytes), and the connection's write side is shut before it is closed,
    as ktcp-httpd shuts it; --pad out of 16..4096 is refused."""
    import engines  # tools/ is on sys.path (testlib)
    small = b"Hello, ktcp!\n"
    (tmp_path / "small.txt").write_bytes(small)
    for bad in ("15", "4097"):
        r = subprocess.run([engines.FLOOR_BIN, "--root", str(tmp_path), "--pad", bad],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and "--pad" in r.stderr, r
    req = b"GET /small.txt HTTP/1.0\r\nHost: x\r\n\r\n"
    h = engines.UserHttpd("epoll", str(tmp_path))
    h.start(str(tmp_path), threads=1, user="root")  # the test's root is 0700
    try:
        with socket.create_connection(("127.0.0.1", h.port), timeout=10) as s:
            s.sendall(req)
            httpd_answer = recv_until_close(s)
    finally:
        h.stop()
    if not shutil.which("strace"):
        pytest.skip("strace not installed (scripts/deps installs it)")
    e = engines.FloorHttp(str(tmp_path))
    e.start(str(tmp_path), threads=1)
    tracer = None
    try:
        tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=shutdown,close",
                                   "-o", str(tmp_path / "trace"), "-p", str(e.proc.pid)],
                                  stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while "TracerPid:\t0" in open(f"/proc/{e.proc.pid}/status").read():
            assert time.monotonic() < deadline, "strace did not attach"
            time.sleep(0.05)
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
                s.sendall(req)
                got = recv_until_close(s)
            head, _, body = got.partition(b"\r\n\r\n")
            assert body == small
            pad = [l for l in head.split(b"\r\n") if l.startswith(b"X-Floor-Pad: ")]
            assert len(pad) == 1 and len(pad[0]) + 2 == engines.httpd.FLOOR_HTTP_PAD, head
            # ktcp-httpd's ETag writes the file's mtime (seconds and
            # nanoseconds), size and inode in hex without leading zeros, so
            # its answer moves by a byte or two with the file; the pad is
            # set for the usual length (a nanosecond part under 0x10000000,
            # a quarter of files, makes it a byte shorter)
            assert abs(len(got) - len(httpd_answer)) <= 2, (got, httpd_answer)
    finally:
        if tracer:
            tracer.send_signal(signal.SIGINT)  # detaches
            tracer.wait(timeout=10)
        e.stop()
    calls = (tmp_path / "trace").read_text()
    assert calls.count("shutdown(") >= 3 and "SHUT_WR" in calls, calls[-2000:]


def test_engine_ready_line_is_this_launchs(tmp_path):
    """A port comes back in a later launch and its log path with it (the
    log is appended to): the ready line a server logged before must not
    count as this one's, or the tests talk to a port nobody listens on yet
    (connection refused). The server here starts half a second late."""
    from engines.httpd import UserHttpd
    root = tmp_path / "www"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    first = UserHttpd("epoll", logdir=str(tmp_path), tls=True)
    first.start(str(root))
    port = first.port
    first.stop()

    def late(engine, argv):
        return ["sh", "-c", 'sleep 0.5; exec "$@"', "sh", *argv], None

    again = UserHttpd("epoll", logdir=str(tmp_path), tls=True)
    again.start(str(root), port=port, wrap=late)
    try:
        assert again.log_path == first.log_path
        with socket.create_connection(("127.0.0.1", again.plain_port), timeout=5) as s:
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        again.stop()


def test_free_port_never_hands_out_a_recent_port_again():
    """A server given two ports (plain and TLS) asks for them one after the
    other; the kernel may give a probe's port back at once, so the picker
    itself must not name a port it handed out shortly before."""
    from engines.base import RECENT_PORTS
    ports = [free_port() for _ in range(3 * RECENT_PORTS)]
    for i in range(len(ports) - RECENT_PORTS + 1):
        window = ports[i:i + RECENT_PORTS]
        assert len(set(window)) == RECENT_PORTS, f"a port repeats within {window}"


def test_floor_steers_by_cpu_as_the_runtime(tmp_path):
    """The floor gives a connection to the thread of its SYN's CPU, as
    ktcp's runtime does (user/rt/rt-steer.c), so that its CPU a request
    stays the least a server can do; --steer hash leaves it to the
    kernel's hash, and one thread is never steered."""
    import engines
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2 or allowed != list(range(len(allowed))):
        pytest.skip(f"steering needs CPUs 0..n-1, n >= 2; allowed here: {allowed}")
    (tmp_path / "small.txt").write_bytes(b"x\n")
    for args, said in (([], "steered by CPU"), (["--steer", "hash"], "hashed"),
                       (["--threads", "1"], "hashed")):
        port = engines.free_port()
        p = subprocess.Popen([os.path.join(ROOT, "build", "floor"), "--root", str(tmp_path),
                              "--port", str(port), "--threads", str(len(allowed)), *args],
                             stderr=subprocess.PIPE, text=True)
        try:
            line = p.stderr.readline()
            assert line.rstrip().endswith(said), line
            assert htstress_json("-n", "200", "-c", "10", "-t", "2",
                                 f"http://127.0.0.1:{port}/small.txt")["good"] == 200
        finally:
            p.terminate()
            p.wait(timeout=10)
    r = subprocess.run([os.path.join(ROOT, "build", "floor"), "--root", str(tmp_path),
                        "--steer", "rr"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--steer rr: expected cpu or hash" in r.stderr
