"""Kernel-only checks of khttpd.ko, run inside the VM (KTCP_ENGINES=kernel):
parameter validation, byte-for-byte agreement with the user-space server on
raw requests, every mode, gzip, timers, counters, unload under load and slab
growth. scripts/vm fails the whole run on BUG/WARNING/Oops in the guest's
dmesg. The HTTP conformance suite (tests/http) runs against khttpd too,
through its http_engine fixture; this file holds what only a module has.
"""
import gzip
import os
import pathlib
import pwd
import re
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from testlib import (skip_on_debug_kernel, only_on_kernel, BUILD, ROOT, free_port, kthread_pids, module_path, port_free,
                     readme_commands, require_kind, run, slab_bytes, slab_bytes_beyond_sockets, wait_port)
from engines import HTTPD_BIN
from engines.base import parse_counters

KHTTPD_KO = module_path("khttpd")
PARAMS = "/sys/module/khttpd/parameters"
BIG = 16 * 1024 * 1024


@pytest.fixture(autouse=True)
def kernel_only():
    require_kind("kernel")
    if not os.path.exists(KHTTPD_KO):
        pytest.fail(f"{KHTTPD_KO} is not built (run make modules)")


def module_loaded(name="khttpd"):
    with open("/proc/modules") as f:
        return any(line.split()[0] == name for line in f)


class Khttpd:
    def __init__(self, root, **params):
        self.port = free_port()
        args = [f"root={root}", f"port={self.port}"]
        args += [f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in params.items()]
        run(["insmod", KHTTPD_KO, *args])
        wait_port(self.port)

    def stop(self, limit=20):
        t0 = time.monotonic()
        run(["rmmod", "khttpd"], timeout=60)
        took = time.monotonic() - t0
        assert took < limit, f"rmmod khttpd took {took:.1f} s"
        return took

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if module_loaded():
            self.stop()


def stats():
    out = {}
    with open("/proc/net/khttpd") as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


@pytest.fixture(scope="module")
def docroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    root.chmod(0o755)  # khttpd reads as nobody (uid 65534): let it search
    (root / "hello.txt").write_bytes(b"hello, world\n")
    (root / "page.html").write_bytes(b"<!doctype html><p>" + b"ktcp " * 2000 + b"</p>\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "app.js").write_bytes(b"function f(x) { return x * 2; }\n" * 3000)
    (root / "big.bin").write_bytes(os.urandom(BIG))
    (root / "mid.bin").write_bytes(os.urandom(300_000))
    (root / "sub").mkdir()
    (root / "sub" / "index.html").write_bytes(b"<p>sub index</p>\n")
    (root / "dir").mkdir()
    for i in range(400):  # a listing longer than one 16 KiB piece
        (root / "dir" / f"file-{i:04d} <&>\"'.txt").write_bytes(b"x" * i)
    (root / "dir" / "nested").mkdir()
    (root / "link-in.txt").symlink_to("hello.txt")
    (root / "link-out").symlink_to("/etc/hostname")
    (root / "link-up").symlink_to("../../../../../../etc")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret").write_bytes(b"secret\n")
    (root / "link-outside").symlink_to(outside / "secret")
    return root


def raw(port, data, timeout=10, shut=True):
    """Send raw bytes, read until the server closes (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        got = bytearray()
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except socket.timeout:
            pass
        return bytes(got)


def get(port, path, headers="", version="1.1"):
    req = f"GET {path} HTTP/{version}\r\nHost: x\r\nConnection: close\r\n{headers}\r\n"
    return raw(port, req.encode())


def split(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


def dechunk(body):
    out = bytearray()
    while True:
        line, _, body = body.partition(b"\r\n")
        n = int(line, 16)
        if n == 0:
            return bytes(out)
        out += body[:n]
        body = body[n + 2:]


# ---------------------------------------------------------------- parameters

def dmesg_tail():
    return subprocess.run(["dmesg"], capture_output=True, text=True).stdout[-4000:]


@pytest.mark.parametrize("bad,message", [
    ([], "absolute path"),
    (["root=/nonexistent/www"], "no such directory"),
    (["root=/etc/hostname"], "not a directory"),
    (["root=relative/dir"], "absolute path"),
    (["root=/tmp", "mode=sideways"], "expected unbound, bound or kthread"),
    (["root=/tmp", "port=0"], "non-zero"),
    (["root=/tmp", "backlog=0"], "non-zero"),
    (["root=/tmp", "idle_timeout_ms=999999999"], "at most"),
    # the cache counts in long: 2^63 would read as a negative bound
    (["root=/tmp", "cache_bytes=9223372036854775808"], "cache_bytes=9223372036854775808: at most"),
    # in4_pton() stops at the ':': the load used to bind 127.0.0.1 silently
    (["root=/tmp", "bind=127.0.0.1:80"], "the port is its own parameter"),
    (["root=/tmp", "per_ip_v6_prefix=129"], "per_ip_v6_prefix 1..128"),
    (["root=/"], "the whole file system is not served"),
    (["root=//."], "the whole file system is not served"),
])
def test_rejects_bad_parameters(bad, message):
    r = run(["insmod", KHTTPD_KO, f"port={free_port()}"] + bad, check=False)
    assert r.returncode != 0, f"khttpd loaded with {bad}"
    assert not module_loaded()
    assert message in dmesg_tail(), f"no clear message for {bad}"


def test_parameters_visible_read_only(docroot):
    with Khttpd(docroot, mode="bound", idle_timeout_ms=1234, max_conns=7,
                cache_bytes=1 << 20, gzip=False) as k:
        assert open(f"{PARAMS}/root").read().strip() == str(docroot)
        assert open(f"{PARAMS}/mode").read().strip() == "bound"
        assert open(f"{PARAMS}/idle_timeout_ms").read().strip() == "1234"
        assert open(f"{PARAMS}/max_conns").read().strip() == "7"
        assert open(f"{PARAMS}/cache_bytes").read().strip() == str(1 << 20)
        assert open(f"{PARAMS}/gzip").read().strip() == "N"
        assert open(f"{PARAMS}/port").read().strip() == str(k.port)
        for p in os.listdir(PARAMS):
            assert oct(os.stat(f"{PARAMS}/{p}").st_mode & 0o777) == "0o444", p


# ------------------------------------------------- same bytes as user space

DIFF_REQUESTS = [
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.0\r\n\r\n",
    b"GET /empty.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /mid.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-2999\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-10\r\n\r\n",
    b"GET /mid.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=999999999-\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4, 6-8\r\n\r\n",
    b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /sub HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /sub?a=1&b=%20 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /dir/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /dir/ HTTP/1.0\r\n\r\n",
    b"HEAD /dir/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /dir/nested/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /link-in.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /link-out HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /link-up/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /link-outside HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a%2fb HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a\\b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Long: " + b"b" * 20000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(120)) + b"Host: x\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
    b"GET / HTTP/1.1\nHost: x\n\n",
    b"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n",
    b"POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
    b"DELETE /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbodyGET /empty.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nabc\r\n0\r\n\r\nGET /empty.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
    b"HEAD /mid.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n",
    b"GET http://x/hello.txt HTTP/1.1\r\nHost: y\r\n\r\n",
    b"GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n",
    b"GET /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip;q=0\r\n\r\n",
    b"HEAD /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nRange: bytes=0-9\r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nIf-Range: \"nope\"\r\nRange: bytes=0-1\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n",
    b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello.txt HTTP/1.0\r\n\r\n",
    b"\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n",
    b"GET  /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
]

DATE = re.compile(rb"\r\nDate: [^\r]*\r\n")


BOUNDARY = re.compile(rb"multipart/byteranges; boundary=([0-9A-Za-z]+)")


def normalise(resp):
    """Date aside, and a multipart answer's boundary, random per response."""
    m = BOUNDARY.search(resp)
    if m:
        resp = resp.replace(m.group(1), b"-")
    return DATE.sub(b"\r\nDate: -\r\n", resp)


@pytest.fixture(scope="module")
def user_server(docroot, tmp_path_factory):
    if not os.path.exists(HTTPD_BIN):
        pytest.skip(f"{HTTPD_BIN} is not built: no reference to compare with")
    port = free_port()
    log = tmp_path_factory.mktemp("user") / "err"
    with open(log, "w") as err:
        p = subprocess.Popen([HTTPD_BIN, "--root", str(docroot), "--port", str(port),
                              "--bind", "127.0.0.1", "--model", "epoll", "--threads", "2"],
                             stdout=subprocess.DEVNULL, stderr=err)
    wait_port(port, proc=p)
    yield port
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=15)


@pytest.mark.parametrize("mode", ["unbound", "kthread"])
def test_same_bytes_as_user_server(docroot, user_server, mode):
    """Every request, raw on its own connection: khttpd's answer equals the
    user-space server's byte for byte (Date aside)."""
    with Khttpd(docroot, mode=mode) as k:
        mismatches = []
        for req in DIFF_REQUESTS:
            want = normalise(raw(user_server, req))
            got = normalise(raw(k.port, req))
            if got != want:
                mismatches.append((req[:80], want[:600], got[:600]))
        assert not mismatches, "\n\n".join(
            f"request {r!r}\nuser:   {w!r}\nkhttpd: {g!r}" for r, w, g in mismatches)


# ------------------------------------------------------------ HTTP by mode

@pytest.mark.parametrize("mode", ["unbound", "bound", "kthread"])
def test_every_mode_serves_keep_alive_and_big_files(docroot, mode):
    big = (docroot / "big.bin").read_bytes()
    with Khttpd(docroot, mode=mode) as k:
        with socket.create_connection(("127.0.0.1", k.port), timeout=30) as s:
            f = s.makefile("rb")
            for path, want in (("/hello.txt", b"hello, world\n"), ("/big.bin", big),
                               ("/hello.txt", b"hello, world\n")):
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                status = f.readline()
                assert status == b"HTTP/1.1 200 OK\r\n", status
                length = None
                while True:
                    line = f.readline()
                    if line == b"\r\n":
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                assert length == len(want)
                assert f.read(length) == want
        st = stats()
        assert st["requests"] >= 3 and st["status_2xx"] >= 3
        assert st["bytes_out"] >= len(big)


def test_slow_reader_gets_the_whole_file(docroot):
    """A client that reads slowly holds no worker: the body continues on
    write_space, and other clients are served meanwhile."""
    big = (docroot / "big.bin").read_bytes()
    with Khttpd(docroot) as k:
        # (No tiny SO_RCVBUF: on loopback's 64 KiB MSS a window smaller than
        # a segment leaves TCP to its backed-off zero-window probes.)
        s = socket.create_connection(("127.0.0.1", k.port), timeout=30)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(1)
        for _ in range(20):  # others meanwhile
            assert split(get(k.port, "/hello.txt"))[1] == b"hello, world\n"
        got = bytearray()
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            got += b
        s.close()
        assert split(bytes(got))[1] == big


def test_gzip_only_when_accepted(docroot):
    page = (docroot / "app.js").read_bytes()
    with Khttpd(docroot) as k:
        # app.js (96 KB) is bigger than an inline build: the first answer is
        # identity while the khttpd_gzip workqueue builds the copy
        head, body = split(get(k.port, "/app.js", "Accept-Encoding: gzip, br\r\n"))
        assert "Content-Encoding" not in head and body == page
        for _ in range(200):
            head, body = split(get(k.port, "/app.js", "Accept-Encoding: gzip, br\r\n"))
            if "Content-Encoding: gzip" in head:
                break
            time.sleep(0.05)
        assert "Content-Encoding: gzip" in head and "Vary: Accept-Encoding" in head
        assert gzip.decompress(body) == page
        assert int(re.search(r"Content-Length: (\d+)", head).group(1)) == len(body)
        etag_gz = re.search(r'ETag: ("[^"]*")', head).group(1)
        head, body = split(get(k.port, "/app.js"))
        assert "Content-Encoding" not in head and body == page
        assert "Vary: Accept-Encoding" in head
        assert re.search(r'ETag: ("[^"]*")', head).group(1) != etag_gz
        # the compressed copy is cached: a second gzip request is a hit
        before = stats()["cache_hits"]
        head2, body2 = split(get(k.port, "/app.js", "Accept-Encoding: gzip\r\n"))
        assert gzip.decompress(body2) == page
        assert stats()["cache_hits"] > before
        head, body = split(get(k.port, "/big.bin", "Accept-Encoding: gzip\r\n"))
        assert "Content-Encoding" not in head  # not compressible
    with Khttpd(docroot, gzip=False) as k:
        head, body = split(get(k.port, "/app.js", "Accept-Encoding: gzip\r\n"))
        assert "Content-Encoding" not in head and body == page


def test_unload_while_gzip_builds_run(tmp_path):
    """20 big compressible files asked for with gzip queue 20 builds on the
    khttpd_gzip workqueue; rmmod right after gives them up (at their next
    slice) and returns quickly, freeing everything."""
    line = b"function g(a, b) { return a.concat(b).map(String); } // %d\n"
    tmp_path.chmod(0o755)  # khttpd reads as nobody; pytest makes it 0700
    for i in range(20):
        (tmp_path / f"b{i}.js").write_bytes(
            b"".join(line % (j * 7919 % 100003) for j in range(70000))[:4 << 20])
    k = Khttpd(tmp_path)
    try:
        for i in range(20):
            head, _ = split(get(k.port, f"/b{i}.js", "Accept-Encoding: gzip\r\n"))
            assert head.startswith("HTTP/1.1 200") and "Content-Encoding" not in head
    finally:
        took = k.stop(limit=15)
    assert not module_loaded()
    assert took < 15


def test_cache_sees_changed_files(docroot):
    f = docroot / "changing.txt"
    f.write_bytes(b"one\n")
    with Khttpd(docroot) as k:
        assert split(get(k.port, "/changing.txt"))[1] == b"one\n"
        time.sleep(1.2)
        f.write_bytes(b"second\n")
        os.utime(f, (time.time() + 5, time.time() + 5))
        time.sleep(1.2)  # entries are revalidated at most once a second
        assert split(get(k.port, "/changing.txt"))[1] == b"second\n"
        f.unlink()
        time.sleep(1.2)
        assert split(get(k.port, "/changing.txt"))[0].startswith("HTTP/1.1 404")


def test_cache_bound_evicts(docroot, tmp_path):
    tmp_path.chmod(0o755)  # served as nobody
    for i in range(64):
        (tmp_path / f"f{i}.txt").write_bytes(bytes([65 + i % 26]) * 16000)
    bound = 256 * 1024
    with Khttpd(tmp_path, cache_bytes=bound) as k:
        for rnd in range(2):
            for i in range(64):
                body = split(get(k.port, f"/f{i}.txt"))[1]
                assert body == bytes([65 + i % 26]) * 16000
        st = stats()
        assert st["cache_evictions"] > 0
        assert st["cache_bytes"] <= bound


# ---------------------------------------------------------------- timers

def test_idle_connection_closed_by_its_timer(docroot):
    with Khttpd(docroot, idle_timeout_ms=1000) as k:
        s = socket.create_connection(("127.0.0.1", k.port), timeout=10)
        t0 = time.monotonic()
        assert s.recv(100) == b""  # closed without a word, no other traffic
        assert 0.8 < time.monotonic() - t0 < 6
        s.close()
        assert stats()["timeouts"] >= 1


def test_slow_header_gets_408(docroot):
    with Khttpd(docroot, idle_timeout_ms=1000) as k:
        s = socket.create_connection(("127.0.0.1", k.port), timeout=10)
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHo")
        t0 = time.monotonic()
        got = b""
        while True:
            b = s.recv(1000)
            if not b:
                break
            got += b
        assert got.startswith(b"HTTP/1.1 408 "), got
        assert time.monotonic() - t0 < 6
        s.close()


def test_max_conns_answers_503(docroot):
    with Khttpd(docroot, max_conns=2) as k:
        # The readiness probe's connection accepted and gone first: else it
        # can be one of the two counted below (active 0 is also what the
        # count reads before the accept thread took the probe at all).
        deadline = time.monotonic() + 10
        while not (stats()["accepted"] >= 1 and stats()["active"] == 0):
            assert time.monotonic() < deadline, "readiness probe never settled"
            time.sleep(0.05)
        held = [socket.create_connection(("127.0.0.1", k.port)) for _ in range(2)]
        # Both held connections accepted before the third arrives; on a
        # loaded host the accept thread can lag.
        wait_active(2, timeout=10)
        resp = raw(k.port, b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", shut=False)
        assert resp.startswith(b"HTTP/1.1 503 "), resp
        for s in held:
            s.close()
        assert stats()["refused"] >= 1


def wait_active(n, timeout=60):
    deadline = time.monotonic() + timeout
    while stats()["active"] != n:
        assert time.monotonic() < deadline, f"active {stats()['active']}, expected {n}"
        time.sleep(0.1)


def test_kthread_mode_has_a_hard_cap(docroot):
    """mode=kthread with max_conns=0 (no limit) still makes at most 1024
    connection threads: the next connection gets the planned 503."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    cap = 1024
    with Khttpd(docroot, mode="kthread", max_conns=0) as k:
        wait_active(0)
        held = []
        try:
            for _ in range(cap):
                held.append(socket.create_connection(("127.0.0.1", k.port), timeout=30))
            wait_active(cap, timeout=120)
            resp = raw(k.port, b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n", shut=False)
            assert resp.startswith(b"HTTP/1.1 503 "), resp[:60]
            assert len(kthread_pids("khttpd-conn")) <= cap
            assert stats()["refused"] >= 1
        finally:
            for s in held:
                s.close()
        wait_active(0, timeout=120)


def kernel_slab():
    """Bytes the kernel holds in slabs and large kmallocs: the Slab line of
    /proc/meminfo (a buffer of more than two pages comes from the page
    allocator and is counted there, not in /proc/slabinfo)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Slab:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Slab line in /proc/meminfo")


def record(line):
    """Figures worth keeping beside the run (build/khttpd-memory.txt)."""
    with open(os.path.join(BUILD, "khttpd-memory.txt"), "a") as f:
        f.write(f"{os.uname().release}: {line}\n")


@pytest.mark.release_kernel
@pytest.mark.parametrize("big", [False, True], ids=["small-heads", "24k-heads"])
def test_idle_connections_hold_no_request_buffer(docroot, big):
    """An idle keep-alive connection with nothing buffered holds no request
    buffer: not the 4 KiB one (slab), and not one a long request grew to
    32 KiB (pages). Measured over many idle connections."""
    skip_on_debug_kernel()
    n = 300 if big else 1000
    pad = "".join(f"X-Pad-{i}: {'p' * 3900}\r\n" for i in range(4)) if big else ""
    query = "?" + "q" * 6000 if big else ""
    req = f"GET /hello.txt{query} HTTP/1.1\r\nHost: x\r\n{pad}\r\n".encode()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    with Khttpd(docroot) as k:
        get(k.port, "/hello.txt")
        wait_active(0)
        time.sleep(0.5)
        slab0, mem0, own0 = slab_bytes(), kernel_slab(), slab_bytes_beyond_sockets()
        held = []
        try:
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", k.port), timeout=30)
                s.sendall(req)
                got = b""
                while b"hello, world\n" not in got:
                    b = s.recv(4096)
                    assert b, got[:60]
                    got += b
                assert got.startswith(b"HTTP/1.1 200 "), got[:60]
                held.append(s)
            time.sleep(1)
            slab1, mem1, own1 = slab_bytes(), kernel_slab(), slab_bytes_beyond_sockets()
        finally:
            for s in held:
                s.close()
        per_slab = (slab1 - slab0) / n
        per_mem = (mem1 - mem0) / n
        per_own = (own1 - own0) / n
        record(f"{n} idle connections ({'24 KiB' if big else 'small'} heads): "
               f"slabinfo {per_slab / 1024:.1f} KiB ({per_own / 1024:.2f} KiB beyond the "
               f"sockets), meminfo Slab {per_mem / 1024:.1f} KiB per connection "
               f"(+{(slab1 - slab0) >> 10} KiB, +{(mem1 - mem0) >> 10} KiB)")
        # What stays is the connection (a 288-byte object: the request's
        # part went back to its own cache), its socket and the client's
        # (about 6.5 KiB of slab together, not the server's doing). Kept
        # while idle, the request's part would add 3.5 KiB beyond the sockets
        # (the old 4 KiB connection: 4 KiB), a request buffer 4 KiB
        # (slabinfo) or 32 KiB (meminfo's Slab: pages).
        if big:
            assert per_mem < 20 * 1024, f"{per_mem / 1024:.1f} KiB per idle connection"
        else:
            assert per_own < 2 * 1024, \
                f"{per_own / 1024:.2f} KiB slab per idle connection beyond its sockets"


# ----------------------------------------------------- unload and memory

@pytest.mark.parametrize("mode", ["unbound", "kthread"])
def test_unload_mid_download_of_50_connections(docroot, mode):
    k = Khttpd(docroot, mode=mode)
    socks = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", k.port), timeout=10)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        for s in socks[:25]:
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        # mode=kthread creates a thread per accept: let the accept thread
        # catch up (slow under emulation) before counting.
        deadline = time.monotonic() + 20
        while stats()["active"] < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stats()["active"] == 50
    finally:
        k.stop(limit=10)
    for s in socks:
        s.close()
    assert not module_loaded()




@pytest.mark.release_kernel
def test_slab_growth_bounded_by_cache(docroot):
    """100,000 requests over 1,000 keep-alive connections (100 each,
    pipelined): slab memory ends within the cache bound of where it started.
    About 40 s under software emulation: 6.12 only."""
    skip_on_debug_kernel()
    only_on_kernel("6.12")
    bound = 2 << 20
    conns, per_conn = 1000, 100
    paths = [b"/hello.txt", b"/page.html", b"/nope", b"/sub/", b"/mid.bin"]
    with Khttpd(docroot, cache_bytes=bound) as k:
        get(k.port, "/hello.txt")  # warm up the module's own slabs
        time.sleep(0.5)
        before = slab_bytes()

        def client(first, count):
            for c in range(first, first + count):
                with socket.create_connection(("127.0.0.1", k.port), timeout=30) as s:
                    req = b"".join(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % paths[(c + i) % len(paths)]
                                   for i in range(per_conn - 1))
                    req += b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                    s.sendall(req)
                    while s.recv(1 << 16):
                        pass
        threads = [threading.Thread(target=client, args=(i * 100, 100)) for i in range(conns // 100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st = stats()
        assert st["requests"] >= conns * per_conn
        deadline = time.monotonic() + 10
        while stats()["active"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stats()["active"] == 0
        time.sleep(1)
        growth = slab_bytes() - before
        assert growth < bound + (1 << 20), f"slab grew {growth} bytes"
    with open("/proc/slabinfo") as f:
        caches = f.read()
    assert "khttpd_conn" not in caches and "khttpd_req" not in caches


def test_counters_move(docroot):
    with Khttpd(docroot) as k:
        # The readiness probe's connection must be accepted and gone first,
        # or it lands between the two snapshots.
        deadline = time.monotonic() + 10
        while not (stats()["accepted"] >= 1 and stats()["active"] == 0):
            assert time.monotonic() < deadline, "readiness probe never settled"
            time.sleep(0.05)
        st0 = stats()
        get(k.port, "/hello.txt")
        get(k.port, "/nope")
        raw(k.port, b"BAD\r\n\r\n")
        st1 = stats()
        assert st1["accepted"] - st0["accepted"] == 3
        assert st1["status_2xx"] - st0["status_2xx"] == 1
        assert st1["status_4xx"] - st0["status_4xx"] == 2
        assert st1["requests"] - st0["requests"] == 3
        assert st1["bytes_out"] > st0["bytes_out"]
        assert st1["cache_misses"] + st1["cache_hits"] > st0["cache_misses"] + st0["cache_hits"]


TRACEFS = "/sys/kernel/tracing"
TRACE_LINE = re.compile(r"khttpd_request:\s+peer=(\S+) method=(\S*) target=(\S*) "
                        r"status=(\d+) bytes=(\d+) usecs=(\d+)")


@pytest.fixture
def tracefs():
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        os.makedirs(TRACEFS, exist_ok=True)
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=False)
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        pytest.fail("tracefs is not available in the guest")
    # an earlier test (test_drop_tcp_socket.py's kmalloc trace) leaves the
    # ring buffer off
    with open(os.path.join(TRACEFS, "tracing_on"), "w") as f:
        f.write("1")
    yield TRACEFS
    with open(os.path.join(TRACEFS, "trace"), "w") as f:
        f.write("")


def wait_no_connection(timeout=10):
    """Until khttpd holds no connection, so that none of its workers runs
    module code. Switching a trace event patches that code (its static
    branches), and under QEMU's software emulation (TCG, QEMU 7.2) a vCPU
    running the patched instruction at that moment can keep a stale copy
    with the patch's int3: the kernel's int3 handler finds the int3 gone
    and returns to it, forever, on every such vCPU (both kworkers stuck in
    khttpd_trace_begin, soft lockups that no user space is left to copy
    out of the kernel log). Real CPUs, and KVM, see the new bytes. (The
    scheduler's share of the patching, record-cmd, is off in the VM:
    tests/conftest.py.)"""
    deadline = time.monotonic() + timeout
    while stats()["active"]:
        assert time.monotonic() < deadline, f"{stats()['active']} connections still live"
        time.sleep(0.05)


def test_request_trace_event(docroot, tracefs):
    """khttpd:khttpd_request records every answered request — peer, method,
    target, status, bytes sent, duration — the kernel's way to an access
    log (trace-cmd record -e khttpd); nothing is recorded while it is off."""
    with Khttpd(docroot) as k:
        enable = os.path.join(tracefs, "events/khttpd/khttpd_request/enable")
        assert os.path.exists(enable), os.listdir(os.path.join(tracefs, "events"))
        with open(os.path.join(tracefs, "trace"), "w") as f:
            f.write("")
        get(k.port, "/hello.txt")  # off: not recorded
        wait_no_connection()
        with open(enable, "w") as f:
            f.write("1")
        try:
            whole = get(k.port, "/hello.txt")
            with socket.create_connection(("127.0.0.1", k.port), timeout=10) as s:
                port = s.getsockname()[1]
                s.sendall(b"GET /nope?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                          b"HEAD /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                got = b""
                while (b := s.recv(65536)):
                    got += b
            raw(k.port, b"BAD\r\n\r\n")
            time.sleep(0.2)
        finally:
            wait_no_connection()
            with open(enable, "w") as f:
                f.write("0")
        with open(os.path.join(tracefs, "trace")) as f:
            recs = [m.groups() for m in map(TRACE_LINE.search, f) if m]
    assert len(recs) == 4, recs
    peer, method, target, status, nbytes, usecs = recs[0]
    assert (method, target, status) == ("GET", "/hello.txt", "200")
    assert peer.startswith("127.0.0.1:") and int(nbytes) == len(whole)
    assert recs[1][:5] == (f"127.0.0.1:{port}", "GET", "/nope?x=1", "404", recs[1][4])
    assert recs[2][:4] == (f"127.0.0.1:{port}", "HEAD", "/page.html", "200")
    assert int(recs[1][4]) + int(recs[2][4]) == len(got)
    assert recs[3][1:4] == ("", "", "400")  # no request parsed
    assert all(int(r[5]) < 10_000_000 for r in recs)


def proxy_get(port, header, path):
    """header, then GET path (Connection: close): the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(header + f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        got = b""
        while (b := s.recv(65536)):
            got += b
    return got


@pytest.mark.parametrize("mode", ["unbound", "kthread"])
def test_proxy_client_in_trace_event(docroot, tracefs, mode):
    """proxy_protocol=1: the request trace (khttpd's access log) records
    the client a PROXY header names, with its port; LOCAL keeps the peer."""
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    block6 = (socket.inet_pton(socket.AF_INET6, "2001:db8::20") +
              socket.inet_pton(socket.AF_INET6, "::1") + struct.pack(">HH", 40002, 80))
    tlv = b"\x02\x00\x0bexample.com"
    headers = [
        b"PROXY TCP4 192.0.2.10 127.0.0.1 40000 80\r\n",
        b"PROXY TCP6 2001:db8::10 ::1 40001 80\r\n",
        sig + b"\x21\x21" + struct.pack(">H", len(block6 + tlv)) + block6 + tlv,
        sig + b"\x20\x00\x00\x00",  # LOCAL
    ]
    with Khttpd(docroot, proxy_protocol=True, mode=mode) as k:
        enable = os.path.join(tracefs, "events/khttpd/khttpd_request/enable")
        with open(os.path.join(tracefs, "trace"), "w") as f:
            f.write("")
        wait_no_connection()
        with open(enable, "w") as f:
            f.write("1")
        try:
            for h in headers:
                assert proxy_get(k.port, h, "/hello.txt").startswith(b"HTTP/1.1 200 OK\r\n")
            time.sleep(0.2)
        finally:
            wait_no_connection()
            with open(enable, "w") as f:
                f.write("0")
        with open(os.path.join(tracefs, "trace")) as f:
            recs = [m.groups() for m in map(TRACE_LINE.search, f) if m]
        st = stats()
    peers = [r[0] for r in recs]
    assert peers[:3] == ["192.0.2.10:40000", "[2001:db8::10]:40001", "[2001:db8::20]:40002"], recs
    assert len(peers) == 4 and peers[3].startswith("127.0.0.1:"), recs
    assert st["proxy_headers"] == 4 and st["proxy_refused"] == 0, st


def test_trace_event_toggled_under_load(docroot, tracefs):
    """The trace event switched on and off 40 times while four clients keep
    sending pipelined requests: enabling patches the running module's code
    while its workers run it. Every response arrives whole, every record
    is one of those requests, and the module unloads.

    Under software emulation this wedges the guest within a few hundred
    switches (see wait_no_connection): it runs under KVM, or under TCG
    with KTCP_TCG_PATCH_RACE=1 to reproduce that."""
    if os.environ.get("KTCP_VM_ACCEL") != "kvm" and os.environ.get("KTCP_TCG_PATCH_RACE") != "1":
        pytest.skip("patching code that workers run wedges QEMU's software emulation "
                    "(stale int3); KVM only, or KTCP_TCG_PATCH_RACE=1")
    enable = os.path.join(tracefs, "events/khttpd/khttpd_request/enable")
    reqs = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n" * 4 + \
        b"GET /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with Khttpd(docroot) as k:
        with open(os.path.join(tracefs, "trace"), "w") as f:
            f.write("")
        stop = threading.Event()
        errors, rounds = [], [0] * 4

        def client(i):
            try:
                while not stop.is_set():
                    with socket.create_connection(("127.0.0.1", k.port), timeout=10) as s:
                        s.sendall(reqs)
                        got = bytearray()
                        while (b := s.recv(65536)):
                            got += b
                            assert len(got) < 1 << 20, "more bytes than five responses"
                    assert got.count(b"HTTP/1.1 200 OK\r\n") == 5, got[:300]
                    rounds[i] += 1
            except Exception as e:  # noqa: BLE001 — reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        try:
            for n in range(40):
                with open(enable, "w") as f:
                    f.write("0" if n % 2 else "1")
                time.sleep(0.05)
        finally:
            with open(enable, "w") as f:
                f.write("0")
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a client is still waiting"
        assert not errors, errors[:3]
        assert all(rounds), rounds
        with open(os.path.join(tracefs, "trace")) as f:
            lines = [line for line in f if "khttpd_request:" in line]
    recs = [TRACE_LINE.search(line) for line in lines]
    assert recs and all(recs), lines[:5]
    assert {(r.group(2), r.group(3), r.group(4)) for r in recs} <= {
        ("GET", "/hello.txt", "200"), ("GET", "/page.html", "200")}, lines[:5]


PROM_LINE = re.compile(r'^(khttpd_[a-z_]+)(\{class="[1-5]xx"\})? (\d+)$')


def test_metrics_in_prometheus_format(docroot):
    """/proc/net/khttpd_metrics: the counters of /proc/net/khttpd in the
    Prometheus text format, named and documented as ktcp-httpd's."""
    with Khttpd(docroot) as k:
        get(k.port, "/hello.txt")
        get(k.port, "/nope")
        plain = stats()
        with open("/proc/net/khttpd_metrics") as f:
            text = f.read()
    helps, types, samples = set(), {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        else:
            m = PROM_LINE.match(line)
            assert m, line
            samples[m.group(1) + (m.group(2) or "")] = int(m.group(3))
    assert set(types) == helps
    assert types["khttpd_requests_total"] == "counter"
    assert types["khttpd_active"] == "gauge"
    assert samples["khttpd_requests_total"] == plain["requests"]
    assert samples["khttpd_accepted_total"] == plain["accepted"]
    assert samples['khttpd_responses_total{class="2xx"}'] == plain["status_2xx"]
    assert samples['khttpd_responses_total{class="4xx"}'] == plain["status_4xx"]
    assert samples["khttpd_cache_entries"] == plain["cache_entries"]
    assert plain["status_4xx"] >= 1 and plain["status_2xx"] >= 1


LEASE_HOLDER = r"""
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, signal.SIG_IGN)  # the lease break's signal
fd = int(sys.argv[1])  # opened by the test: the owner need not reach the file
fcntl.fcntl(fd, getattr(fcntl, "F_SETLEASE", 1024), fcntl.F_WRLCK)
print("ready", flush=True)
sys.stdin.read()
"""
LEASE_UID = 4242


@pytest.fixture
def leased(tmp_path):
    """A 1 MiB file under a write lease its owner (uid 4242, no privilege)
    holds until the test ends; khttpd has never opened it."""
    root = tmp_path / "www"
    root.mkdir()
    root.chmod(0o755)
    tmp_path.chmod(0o755)
    (root / "hello.txt").write_bytes(b"hello, world\n")
    f = root / "leased.bin"
    f.write_bytes(os.urandom(1 << 20))
    f.chmod(0o644)
    os.chown(f, LEASE_UID, LEASE_UID)
    # The system's python: the owner may not enter the virtualenv's home.
    # The file is opened here and handed over (the test's directories are
    # root's, 0700); a write lease needs the one open file to be the
    # holder's, so ours closes.
    fd = os.open(f, os.O_RDONLY)
    try:
        holder = subprocess.Popen(["/usr/bin/python3", "-c", LEASE_HOLDER, str(fd)],
                                  user=LEASE_UID, group=LEASE_UID, cwd="/", pass_fds=[fd],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    finally:
        os.close(fd)
    try:
        assert holder.stdout.readline().strip() == "ready", "no lease taken"
        yield root
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def timed_get(port, path):
    t0 = time.monotonic()
    resp = get(port, path)
    return resp, time.monotonic() - t0


def test_leased_file_answers_503_at_once(leased):
    """A file under a write lease: the open would sleep until the holder
    lets go (lease-break-time, 45 s); khttpd's non-blocking open answers
    503 with Retry-After at once instead, and the worker is free."""
    with Khttpd(leased) as k:
        resp, took = timed_get(k.port, "/leased.bin")
        assert took < 1.0, f"GET of a leased file took {took:.2f} s"
        assert resp.startswith(b"HTTP/1.1 503 "), resp[:80]
        assert b"\r\nRetry-After: 1\r\n" in resp.split(b"\r\n\r\n")[0], resp[:300]


def test_leased_file_never_stalls_the_workers(leased):
    """260 GETs of the leased file in flight at once; GET /hello.txt still
    answers within 1 s, and every one of the 260 gets its 503."""
    with Khttpd(leased) as k:
        req = b"GET /leased.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        socks = []
        try:
            for _ in range(260):
                s = socket.create_connection(("127.0.0.1", k.port), timeout=30)
                s.sendall(req)
                socks.append(s)
            resp, took = timed_get(k.port, "/hello.txt")
            assert resp.startswith(b"HTTP/1.1 200 "), resp[:80]
            assert took < 1.0, f"GET /hello.txt took {took:.2f} s behind 260 leased GETs"
            for s in socks:
                got = s.recv(64)
                assert got.startswith(b"HTTP/1.1 503 "), got
        finally:
            for s in socks:
                s.close()


TRACING = "/sys/kernel/tracing"
SERVE_UID = 4343


def cred_fsuid_offset():
    """Where struct cred keeps fsuid on the running kernel (its BTF): 28 on
    6.1, 32 on 6.12 (usage became an atomic_long_t)."""
    out = subprocess.run(["pahole", "-C", "cred", "/sys/kernel/btf/vmlinux"],
                         capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"kuid_t\s+fsuid;\s*/\*\s*(\d+)", out)
    assert m, out[:2000]
    return int(m.group(1))


def tracefs_write(name, line):
    """One write to a tracefs file (os.write: Python's append mode would
    seek, which tracefs refuses)."""
    fd = os.open(f"{TRACING}/{name}", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@pytest.fixture
def kprobes():
    """kprobe events on override_creds (with the new credential's fsuid),
    revert_creds, splice_direct_to_actor and vfs_getattr; yields a function
    that returns the events traced so far as (pid, event, fsuid or None)."""
    if not os.path.isdir(f"{TRACING}/events"):
        run(["mount", "-t", "tracefs", "nodev", TRACING])
    off = cred_fsuid_offset()
    probes = [f"p:kdef/ovr override_creds fsuid=+{off}(%di):u32", "p:kdef/rev revert_creds",
              "p:kdef/splice splice_direct_to_actor", "p:kdef/getattr vfs_getattr"]
    for p in probes:
        tracefs_write("kprobe_events", p + "\n")
    fd = os.open(f"{TRACING}/trace", os.O_WRONLY | os.O_TRUNC)  # empty the buffer
    os.close(fd)
    tracefs_write("events/kdef/enable", "1")

    def events():
        line_re = re.compile(r"-(\d+)\s+\[\d+\].*?\s(ovr|rev|splice|getattr):.*?(?:fsuid=(\d+))?$")
        out = []
        with open(f"{TRACING}/trace") as f:
            for line in f:
                m = line_re.search(line.rstrip())
                if m:
                    out.append((int(m.group(1)), m.group(2),
                                int(m.group(3)) if m.group(3) else None))
        return out
    try:
        yield events
    finally:
        tracefs_write("events/kdef/enable", "0")
        for p in probes:
            tracefs_write("kprobe_events", "-:kdef/" + p.split()[0].split("/")[1] + "\n")


# struct cred's layout comes from the kernel's BTF, which the debug kernel,
# built without debug info, does not have.
@pytest.mark.release_kernel
def test_every_file_access_runs_as_the_serving_user(tmp_path, kprobes):
    """docs/security.md: files are never touched as root. Each zero-copy
    send of a file (splice_direct_to_actor) and each stat of the gzip build
    (vfs_getattr) by a khttpd worker runs inside override_creds() of the
    serving credential (uid=4343 here), as the kprobes in the VM see it:
    per worker, the credentials pushed and not yet reverted. Before, both
    ran with the kworker's own (root) credential."""
    root = tmp_path / "www"
    root.mkdir()
    tmp_path.chmod(0o755)
    root.chmod(0o755)
    (root / "big.bin").write_bytes(os.urandom(1 << 20))  # past the body cache: spliced
    (root / "big.txt").write_bytes(b"compressible line of text\n" * 80000)  # gzip built off the file
    with Khttpd(root, uid=SERVE_UID, gid=SERVE_UID) as k:
        resp = get(k.port, "/big.bin")
        assert resp.startswith(b"HTTP/1.1 200 ") and len(resp) > 1 << 20, resp[:80]
        deadline = time.monotonic() + 30
        while True:  # the first request queues the build; identity until it is there
            resp = get(k.port, "/big.txt", "Accept-Encoding: gzip\r\n")
            assert resp.startswith(b"HTTP/1.1 200 "), resp[:80]
            if b"Content-Encoding: gzip" in resp.split(b"\r\n\r\n")[0]:
                break
            assert time.monotonic() < deadline, "no gzip copy built in 30 s"
            time.sleep(0.2)
    stacks, seen, outside = {}, {"splice": 0, "getattr": 0}, []
    workers = {pid for pid, ev, fsuid in kprobes() if ev == "ovr" and fsuid == SERVE_UID}
    assert workers, "no override_creds() of the serving credential traced"
    for pid, ev, fsuid in kprobes():
        st = stacks.setdefault(pid, [])
        if ev == "ovr":
            st.append(fsuid)
        elif ev == "rev":
            if st:
                st.pop()
        elif pid in workers:
            seen[ev] += 1
            # Under the serving credential, perhaps with a file system's
            # own above it: overlayfs (the VM's /tmp) overrides with its
            # mounter's credential for the call on the layer beneath.
            if SERVE_UID not in st:
                outside.append((pid, ev, list(st)))
    assert seen["splice"] >= 1 and seen["getattr"] >= 1, seen
    assert not outside, f"file accesses by khttpd workers not as uid {SERVE_UID}: {outside[:10]}"


# ------------------------------------------------------- listings' memory

CROWD = 20000  # HTTP_SERVER_LISTING_MAX_ENTRIES: the biggest table there is


@pytest.fixture(scope="module")
def crowd_root(tmp_path_factory):
    """A root with crowd/ (20,000 names), small/ (3) and a file."""
    root = tmp_path_factory.mktemp("crowdroot")
    root.chmod(0o755)
    (root / "hello.txt").write_bytes(b"hello, world\n")
    crowd = root / "crowd"
    crowd.mkdir()
    # 24 bytes a name: 480,000 bytes, within a table's 512 KiB of names
    names = [f"entry-{(i * 7919) % CROWD:05d}-crowded.txt" for i in range(CROWD)]
    for n in names:  # created out of order: the listing sorts them
        os.mknod(crowd / n)
    small = root / "small"
    small.mkdir()
    for n in ("b.txt", "a.txt", "c.txt"):
        (small / n).write_bytes(b"x\n")
    return root


def kernel_memory():
    """Slab + VmallocUsed from /proc/meminfo: what kmalloc (its big
    buckets are pages counted in Slab) and kvmalloc's vmalloc side hold."""
    got = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            got[k] = int(v.split()[0]) * 1024
    return got["Slab"] + got["VmallocUsed"]


class SmallSendBuffers:
    """tcp_wmem capped for the connections made meanwhile (the guest's
    setting, restored on exit): a server socket then queues about 16 KiB,
    so a listing nobody reads stays in flight after a few rows instead of
    rendering a megabyte of them into the socket first."""

    PATH = "/proc/sys/net/ipv4/tcp_wmem"

    def __enter__(self):
        with open(self.PATH) as f:
            self.old = f.read()
        with open(self.PATH, "w") as f:
            f.write("4096 16384 16384")
        return self

    def __exit__(self, *exc):
        with open(self.PATH, "w") as f:
            f.write(self.old)


def stalled_listing(port, path):
    """A connection that asks for a listing and never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return s


def listing_names(resp):
    head, body = split(resp)
    assert head.startswith("HTTP/1.1 200 "), head[:200]
    text = dechunk(body).decode()
    return [h.removeprefix("./") for h in re.findall(r'<a href="([^"]*)">', text)], text


def wait_stat(name, cond, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not cond(stats()[name]):
        assert time.monotonic() < deadline, f"{what}: {name} {stats()[name]}"
        time.sleep(0.2)


@pytest.mark.release_kernel
def test_500_stalled_listings_share_one_table(crowd_root):
    """500 connections GET a 20,000-name directory and never read: the
    kernel's Slab + VmallocUsed grows by less than 50 MiB (one shared name
    table, a small buffer per connection; a table per connection took
    several hundred), and a normal client is served meanwhile."""
    skip_on_debug_kernel()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    n = 500
    with SmallSendBuffers(), Khttpd(crowd_root) as k:
        get(k.port, "/hello.txt")
        wait_active(0)
        time.sleep(0.5)
        mem0 = kernel_memory()
        held = []
        try:
            for _ in range(n):
                held.append(stalled_listing(k.port, "/crowd/"))
            # every one answered (its head and first rows are out) and none
            # finished: all 500 listings are in flight. (A table built per
            # connection took minutes here: bounded, to measure it.)
            deadline = time.monotonic() + 300
            for s in held:
                s.settimeout(max(1, deadline - time.monotonic()))
                assert s.recv(16, socket.MSG_PEEK).startswith(b"HTTP/1.1 200")
            time.sleep(2)
            mem1 = kernel_memory()
            st = stats()
            grown = mem1 - mem0
            record(f"{n} stalled listings of a {CROWD}-name directory: Slab+VmallocUsed "
                   f"+{grown >> 10} KiB ({grown / n / 1024:.1f} KiB per connection), "
                   f"listing_bytes {st.get('listing_bytes')}")
            assert st.get("listings_refused", 0) == 0
            # a normal client meanwhile: a file, a listing, the big listing
            # whole and sorted from the shared table
            assert split(get(k.port, "/hello.txt"))[1] == b"hello, world\n"
            assert listing_names(get(k.port, "/small/"))[0] == ["../", "a.txt", "b.txt", "c.txt"]
            names, text = listing_names(get(k.port, "/crowd/"))
            names.remove("../")
            assert len(names) == CROWD and names == sorted(names)
            assert len(set(names)) == CROWD and "Only the first" not in text
        finally:
            for s in held:
                s.close()
        assert grown < 50 << 20, f"+{grown >> 20} MiB for {n} stalled listings"
        assert st["listing_bytes"] > 0
        wait_active(0, timeout=120)
        wait_stat("listing_bytes", lambda v: v == 0, "listings gone")


def test_listing_beyond_budget_gets_503(crowd_root):
    """listing_max: the listing beyond it gets 503 with Retry-After and is
    counted; once the others are gone listings are served again.
    listing_bytes too small for the 20,000-name table: 503 for it, while a
    small directory still lists."""
    with SmallSendBuffers(), Khttpd(crowd_root, listing_max=2) as k:
        held = [stalled_listing(k.port, "/crowd/") for _ in range(2)]
        try:
            for s in held:
                assert s.recv(16, socket.MSG_PEEK).startswith(b"HTTP/1.1 200")
            head, body = split(get(k.port, "/small/"))
            assert head.startswith("HTTP/1.1 503 "), head
            assert "\r\nRetry-After: 1\r\n" in head, head
            assert body == b"503 Service Unavailable\n"
            assert stats()["listings_refused"] == 1
            # files are not listings
            assert split(get(k.port, "/hello.txt"))[1] == b"hello, world\n"
        finally:
            for s in held:
                s.close()
        wait_stat("listing_bytes", lambda v: v == 0, "listings gone")
        assert listing_names(get(k.port, "/small/"))[0] == ["../", "a.txt", "b.txt", "c.txt"]
    with Khttpd(crowd_root, listing_bytes=64 * 1024) as k:
        head, _ = split(get(k.port, "/crowd/"))
        assert head.startswith("HTTP/1.1 503 ") and "\r\nRetry-After: 1\r\n" in head, head
        assert stats()["listings_refused"] == 1
        assert listing_names(get(k.port, "/small/"))[0] == ["../", "a.txt", "b.txt", "c.txt"]
        assert stats()["listing_bytes"] == 0


def test_listing_table_built_once_follows_changes(crowd_root, tmp_path):
    """The table is built once and served to many (each listing whole and
    sorted); a name added makes a new version of the directory, listed at
    once."""
    with Khttpd(crowd_root) as k:
        want = None
        for _ in range(5):
            names, _ = listing_names(get(k.port, "/crowd/"))
            assert len(names) == CROWD + 1 and names[1:] == sorted(names[1:])
            want = want or names
            assert names == want
        cached = stats()["cache_bytes"]
        assert cached > CROWD * 28  # the table (names and offsets) is cached
        (crowd_root / "small" / "0-new.txt").write_bytes(b"new\n")
        try:
            names, _ = listing_names(get(k.port, "/small/"))
            assert names == ["../", "0-new.txt", "a.txt", "b.txt", "c.txt"]
        finally:
            (crowd_root / "small" / "0-new.txt").unlink()
        names, _ = listing_names(get(k.port, "/small/"))
        assert names == ["../", "a.txt", "b.txt", "c.txt"]


# ------------------------------------------- lookups raced by renames, held bytes

RENAMER = """
import os, sys, time
spin, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
a, b = os.path.join(spin, "a"), os.path.join(spin, "b")
n = 0
while time.monotonic() < deadline and n < 5000000:
    os.rename(a, b)
    os.rename(b, a)
    n += 2
print(n, flush=True)
"""


@pytest.fixture
def eagain_probe():
    """A kretprobe on vfs_path_lookup keeping the returns of -EAGAIN
    (what LOOKUP_BENEATH answers when a rename or mount ran during the
    walk); yields a function that counts them so far."""
    if not os.path.isdir(f"{TRACING}/events"):
        run(["mount", "-t", "tracefs", "nodev", TRACING])
    tracefs_write("kprobe_events", "r:kdef/vpl vfs_path_lookup ret=$retval:s32\n")
    fd = os.open(f"{TRACING}/events/kdef/vpl/filter", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"ret == -11")
    finally:
        os.close(fd)
    fd = os.open(f"{TRACING}/trace", os.O_WRONLY | os.O_TRUNC)  # empty the buffer
    os.close(fd)
    tracefs_write("events/kdef/vpl/enable", "1")

    def count():
        with open(f"{TRACING}/trace") as f:
            return sum(1 for line in f if " vpl:" in line and "ret=-11" in line)
    try:
        yield count
    finally:
        tracefs_write("events/kdef/vpl/enable", "0")
        tracefs_write("kprobe_events", "-:kdef/vpl\n")


def test_lookup_raced_by_renames_is_retried(tmp_path, eagain_probe):
    """Two directories renamed back and forth in a loop while a client GETs
    a file (through a symlink whose target climbs with '..', where
    LOOKUP_BENEATH checks for a concurrent rename) that exists throughout:
    the lookups do meet -EAGAIN (the kretprobe counts them), and the bounded
    retry holds: never a 500, a 503 with Retry-After only when every one of
    its three tries met a rename, 206s throughout, and no request held for
    long. (The race is met a few times a run under
    emulation, 3 to 155 in the runs so far; a run that meets none says so
    as a skip.)"""
    root = tmp_path / "www"
    # one symlink whose target walks 800 directories down and 800 back up:
    # a long walk, each '..' step checked for a rename since it began
    depth = 800
    (root / ("a/" * depth)).mkdir(parents=True)
    for spin in ("spin0", "spin1"):
        (root / spin / "a").mkdir(parents=True)
    for p in [tmp_path, root, root / "spin0", root / "spin1", root / "spin0" / "a",
              root / "spin1" / "a"]:
        p.chmod(0o755)
    d = root
    for _ in range(depth):
        d = d / "a"
        d.chmod(0o755)
    (root / "f.bin").write_bytes(os.urandom(100_000))  # past the body cache: opened per GET
    (root / "up.bin").symlink_to("a/" * depth + "../" * depth + "f.bin")
    request = b"GET /up.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n"
    statuses, slowest, eagains = {}, 0.0, 0
    with Khttpd(root) as k:
        renamers = [subprocess.Popen(["/usr/bin/python3", "-c", RENAMER, str(root / spin), "40"],
                                     stdout=subprocess.PIPE, text=True)
                    for spin in ("spin0", "spin1")]
        try:
            deadline = time.monotonic() + 25
            with socket.create_connection(("127.0.0.1", k.port), timeout=10) as s:
                f = s.makefile("rb")
                n = 0
                while n < 20000 and time.monotonic() < deadline:
                    t0 = time.monotonic()
                    s.sendall(request)
                    status = f.readline().split()[1].decode()
                    head, length = [], 0
                    while (line := f.readline()) not in (b"\r\n", b""):
                        head.append(line)
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    f.read(length)
                    slowest = max(slowest, time.monotonic() - t0)
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == "503":
                        assert b"Retry-After: 1\r\n" in head, head
                    n += 1
                    if n % 200 == 0:
                        eagains = eagain_probe()
                        if eagains >= 10 and n >= 400:
                            break
        finally:
            renamed = []
            for r in renamers:
                r.kill()
                renamed.append(r.communicate()[0])
    eagains = eagain_probe()
    record(f"lookups raced by renames: {statuses} in {n} GETs, {eagains} -EAGAIN met, "
           f"slowest {slowest * 1000:.0f} ms")
    assert set(statuses) <= {"206", "503"}, statuses
    # bounded: a retry loop that spun would hold a GET for the whole run
    assert slowest < 5.0, f"a GET took {slowest:.2f} s"
    if not eagains:  # how often the race is met depends on the machine
        pytest.skip(f"no lookup met a rename in {n} GETs: the retry was not exercised")
    # How many tries a rename spoils depends on how the guest schedules
    # the renamers: they rename in bursts, while they hold the CPUs, and a
    # GET's three tries follow each other at once, so they mostly meet the
    # same burst (of the -EAGAINs met, 18 of 996, 12 of 810 and 0 of 129
    # were met by a GET that a later try answered, in three runs). So the
    # test holds what the retry guarantees whatever the scheduling: a 503
    # only after its third -EAGAIN (without the retry each 503 would have
    # met one, and the count below would be negative), never more than
    # three tries a GET, and the server serving on through the race.
    recovered = eagains - 3 * statuses.get("503", 0)
    assert recovered >= 0, (statuses, eagains)
    assert eagains <= 3 * n, (statuses, eagains)
    assert statuses.get("206", 0) > 0, statuses


def test_held_bytes_leave_the_cache_working(tmp_path):
    """Slow readers hold gzip copies of 1 MiB files that eviction took out
    of the cache, more bytes than cache_bytes: the cache counts them
    (cache_bytes above the bound) but eviction aims at what it can free, so
    small files still stay cached (their second round hits) and a new
    gzip copy is still made. Before, held bytes counted as the cache's: each
    insert emptied the whole LRU list, nothing hit and gzip stopped."""
    root = tmp_path / "www"
    root.mkdir()
    tmp_path.chmod(0o755)
    root.chmod(0o755)
    bound = 2 << 20
    nbig, nsmall = 5, 40
    import base64
    for i in range(nbig):  # base64: a gzip copy of about 3/4 of the file
        (root / f"big{i}.txt").write_bytes(base64.encodebytes(os.urandom(768 * 1024)))
    for i in range(nsmall):
        (root / f"s{i}.txt").write_bytes(b"%d\n" % i * 100)
    (root / "page.html").write_bytes(b"<p>compressible</p>\n" * 1000)  # gzipped on the spot
    accept = "Accept-Encoding: gzip\r\n"

    def gzipped(path):
        resp = get(k.port, path, accept)
        assert resp.startswith(b"HTTP/1.1 200 "), resp[:80]
        return b"\r\nContent-Encoding: gzip\r\n" in resp.split(b"\r\n\r\n")[0]

    held = []
    with SmallSendBuffers(), Khttpd(root, cache_bytes=bound, idle_timeout_ms=300000) as k:
        try:
            for i in range(nbig):
                deadline = time.monotonic() + 60
                while not gzipped(f"/big{i}.txt"):  # built off the request path
                    assert time.monotonic() < deadline, f"no gzip copy of big{i}.txt"
                    time.sleep(0.2)
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(30)
                s.connect(("127.0.0.1", k.port))
                s.sendall(f"GET /big{i}.txt HTTP/1.1\r\nHost: x\r\n{accept}\r\n".encode())
                head = s.recv(1024, socket.MSG_PEEK)
                assert b"\r\nContent-Encoding: gzip\r\n" in head, head[:300]
                held.append(s)  # reads no more: its gzip copy stays in flight
            st = stats()
            assert st["cache_bytes"] > bound, st  # held copies beyond the bound
            assert st["cache_evictions"] >= 2, st
            before = stats()
            for rnd in range(2):
                for i in range(nsmall):
                    assert split(get(k.port, f"/s{i}.txt"))[1] == b"%d\n" % i * 100
            after = stats()
            hits = after["cache_hits"] - before["cache_hits"]
            deadline = time.monotonic() + 30
            while not gzipped("/page.html"):
                assert time.monotonic() < deadline, "no gzip copy of page.html"
                time.sleep(0.2)
            still = stats()["cache_bytes"]
        finally:
            for s in held:
                s.close()
    record(f"{nbig} held gzip copies, cache_bytes {bound}: {still} counted, "
           f"{hits} hits of {nsmall} in the second round of small files")
    assert still > bound, "the readers let go before the small files were served"
    assert hits >= nsmall - 2, (hits, before, after)


# ------------------------------------------------------- README's operating lines

def wait_for(what, timeout=10):
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def check_serving_options(port, www):
    """What README's expires / gzip_static / error-page lines promise, the
    same for ktcp-httpd and khttpd."""
    head, body = split(get(port, "/missing"))
    assert head.startswith("HTTP/1.1 404") and body == (www / "404.html").read_bytes(), head
    head, body = split(get(port, "/hello.txt"))
    assert head.startswith("HTTP/1.1 200") and "max-age=3600" in head and "Expires:" in head, head
    head, body = split(get(port, "/page.html", "Accept-Encoding: gzip\r\n"))
    assert "Content-Encoding: gzip" in head, head
    assert gzip.decompress(body) == (www / "page.html").read_bytes()


def start_line(line, cwd=ROOT):
    return subprocess.Popen(["bash", "-c", "exec " + line], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def stop_line(proc):
    proc.terminate()
    out = proc.communicate(timeout=20)[0]
    assert proc.returncode == 0, out


def record_readme_trace(line, where):
    """README's trace-cmd line run in a folder of where (it writes
    trace.dat there) while khttpd serves on 8081: once it records, one
    request, then Ctrl-C (SIGINT); trace-cmd report shows the request."""
    d = tempfile.mkdtemp(prefix="trace-", dir=where)
    out = os.path.join(d, "record.log")
    with open(out, "w") as log:
        proc = subprocess.Popen(["bash", "-c", "exec " + line], cwd=d, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
    # recording: the event is on and the per-CPU files are open (its
    # "Hit Ctrl^C" line sits in stdio's buffer while the output is a file)
    enable = "/sys/kernel/tracing/events/khttpd/khttpd_request/enable"

    def recording():
        return (open(enable).read().strip() == "1"
                and any(f.startswith("trace.dat.cpu") for f in os.listdir(d)))
    try:
        wait_for(lambda: recording() or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, open(out).read()
        # trace-cmd copies the kernel's buffer a page at a time: the marked
        # request first, then enough to fill pages (about 100 bytes a record)
        assert split(get(8081, "/hello.txt?traced"))[0].startswith("HTTP/1.1 200")
        for i in range(200):
            get(8081, f"/hello.txt?n={i}")
        wait_no_connection()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    assert proc.returncode == 0, open(out).read()
    report = run(["trace-cmd", "report"], cwd=d).stdout
    recs = [m.groups() for m in map(TRACE_LINE.search, report.splitlines()) if m]
    assert len(recs) >= 100 and all(r[3] == "200" for r in recs), (report[-2000:], open(out).read())
    assert any(r[1:4] == ("GET", "/hello.txt?traced", "200") for r in recs), (
        report[-2000:], open(out).read()[-2000:], os.listdir(d))


def test_readme_operating_commands():
    """README's "Operating it" lines, exactly as written, in the VM, which
    has its own processes for pidof and port 8081; /srv and /var/log are
    tmpfs folders for the test's length (the guest sees the host's files
    read-only). ktcp-httpd with the access log, counters and --user: USR1
    reopens the log (a rotated one: the next request lands in a new
    file), HUP leaves it serving, /_status and /_status/metrics answer;
    the expires, gzip_static and error-page line, for ktcp-httpd and then
    for khttpd (insmod from the module's folder): a missing path is
    answered 404 with /404.html, a file with max-age=3600, a client
    taking gzip the .gz beside it; /proc/net/khttpd_metrics; trace-cmd
    record while khttpd answers, stopped by Ctrl-C as a user would, whose
    report holds the request (the guest's record-cmd is off:
    tests/conftest.py)."""
    (serve, usr1, hup, serve2, insmod, status, metrics, kmetrics,
     trace) = readme_commands("## Operating it", 9)
    assert trace.startswith("trace-cmd record -e khttpd:khttpd_request")
    assert port_free(8081) and not module_loaded()
    mounted = []
    try:
        for d in ("/srv", "/var/log"):
            run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d])
            mounted.append(d)
        os.makedirs("/srv/www")
        # the serving account reopens the log after USR1, as a logs
        # directory of its own lets it (systemd's LogsDirectory=)
        os.makedirs("/var/log/ktcp-httpd")
        pw = pwd.getpwnam("www-data")
        os.chown("/var/log/ktcp-httpd", pw.pw_uid, pw.pw_gid)
        www = pathlib.Path("/srv/www")
        (www / "hello.txt").write_bytes(b"hello, README\n")
        (www / "404.html").write_bytes(b"<p>not here</p>\n")
        page = b"<!doctype html><p>" + b"ktcp " * 2000 + b"</p>\n"
        (www / "page.html").write_bytes(page)
        (www / "page.html.gz").write_bytes(gzip.compress(page))
        for f in www.iterdir():
            f.chmod(0o644)

        log = "/var/log/ktcp-httpd/access.log"
        srv = start_line(serve)
        try:
            wait_port(8081, proc=srv)
            assert split(get(8081, "/hello.txt"))[1] == b"hello, README\n"
            wait_for(lambda: os.path.exists(log) and "GET /hello.txt " in open(log).read())
            os.rename(log, log + ".1")
            run(["bash", "-c", usr1], cwd=ROOT)
            wait_for(lambda: os.path.exists(log))
            get(8081, "/hello.txt?after")
            wait_for(lambda: "GET /hello.txt?after " in open(log).read())
            assert "after" not in open(log + ".1").read()
            run(["bash", "-c", hup], cwd=ROOT)
            time.sleep(0.5)
            assert srv.poll() is None
            assert split(get(8081, "/hello.txt"))[0].startswith("HTTP/1.1 200")
            counters = parse_counters(run(["bash", "-c", status], cwd=ROOT).stdout)
            assert counters["requests"] >= 3 and counters["status_2xx"] >= 3, counters
            prom = run(["bash", "-c", metrics], cwd=ROOT).stdout
            assert re.search(r"^ktcp_httpd_accepted_total [1-9]", prom, re.M), prom[:400]
        finally:
            stop_line(srv)

        srv = start_line(serve2)
        try:
            wait_port(8081, proc=srv)
            check_serving_options(8081, www)
        finally:
            stop_line(srv)

        run(["bash", "-c", insmod], cwd=os.path.dirname(KHTTPD_KO))
        try:
            wait_port(8081)
            check_serving_options(8081, www)
            prom = run(["bash", "-c", kmetrics], cwd=ROOT).stdout
            assert re.search(r"^khttpd_requests_total [1-9]", prom, re.M), prom[:400]
            record_readme_trace(trace, "/srv")
        finally:
            run(["rmmod", "khttpd"], timeout=60)
    finally:
        for d in reversed(mounted):
            run(["umount", d], check=False)
