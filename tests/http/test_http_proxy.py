"""The PROXY protocol (HAProxy's versions 1 and 2) on a listener started
with it: ktcp-httpd --proxy-protocol (--tls-proxy-protocol on a TLS
engine's port, where the header comes before the ClientHello), khttpd
proxy_protocol=1, in its default mode and in mode=kthread (kernel engines
only). The header's client is the one the access log names; LOCAL and
UNKNOWN keep the socket's peer; a header split over packets is taken; no
header, a malformed, oversized or unfinished one closes the connection
without an answer, and is counted. curl --haproxy-protocol is the real
client (it sends v1). A listener without the flag answers a PROXY line 400:
test_http_errors.py::test_400_proxy_header_on_a_plain_listener.

The address khttpd writes is checked through its trace event in
tests/test_khttpd_kernel.py (test_proxy_client_in_trace_event)."""
import os
import re
import shutil
import socket
import struct
import subprocess
import time

import pytest

from engines import tlscert
from testlib import selected_kinds

IDLE_MS = 1500
REQ = b"GET /a.txt?%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v2(cmd, fam, block, tlvs=b""):
    body = block + tlvs
    return V2_SIG + bytes([0x20 | cmd, fam]) + struct.pack(">H", len(body)) + body


def v2_tcp4(src, sport, dst="127.0.0.1", dport=80, tlvs=b""):
    block = socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, dst)
    return v2(1, 0x11, block + struct.pack(">HH", sport, dport), tlvs)


def v2_tcp6(src, sport, dst="::1", dport=80, tlvs=b""):
    block = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    return v2(1, 0x21, block + struct.pack(">HH", sport, dport), tlvs)


# a TLV as balancers send them: PP2_TYPE_AUTHORITY, then a NOOP
TLVS = b"\x02\x00\x0bexample.com" + b"\x04\x00\x03\x00\x00\x00"


def exchange(port, header, request=None, split=None, timeout=10):
    """Send header (in two packets split bytes apart, 200 ms between, Nagle
    off), then request over TLS when port is a TLS engine's; every byte the
    server sends until it closes. A reset counts as a close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    got = b""
    try:
        if split:
            s.sendall(header[:split])
            time.sleep(0.2)
            s.sendall(header[split:])
        else:
            s.sendall(header)
        if request is not None:
            s = tlscert.wrap(s, port)
            s.sendall(request)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        pass
    finally:
        s.close()
    return got


def status_of(resp):
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", resp)
    return int(m.group(1)) if m else None


# khttpd in its default mode and in mode=kthread
MODES = ["default", "kthread"] if "kernel" in selected_kinds() else ["default"]


@pytest.fixture(scope="module", params=MODES)
def proxied(request, http_engine, tmp_path_factory):
    """An instance of the engine whose tested port expects PROXY headers,
    with a short idle timeout and (ktcp-httpd) an access log and counters."""
    mode = request.param
    if mode == "kthread" and http_engine.kind != "kernel":
        pytest.skip("kthread is a mode of khttpd")
    if getattr(http_engine.engine, "tls_agent", False):
        pytest.skip("ktcp-tlsd starts the handshake at accept and takes no PROXY header "
                    "before the ClientHello")
    opts = {"proxy_protocol": True, "idle_timeout_ms": IDLE_MS}
    log = None
    if http_engine.kind != "kernel":
        log = str(tmp_path_factory.mktemp("proxy") / "access.log")
        opts.update(access_log=log, status_path="/status")
    if mode == "kthread":
        opts["mode"] = "kthread"
    with http_engine.spawn(**opts) as e:
        e.proxy_log = log
        yield e


def log_client(e, tag, timeout=5):
    """The client address of the access log's line for /a.txt?tag
    (ktcp-httpd flushes its log about once a second), or None for khttpd."""
    if not e.proxy_log:
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(e.proxy_log):
            with open(e.proxy_log) as f:
                for line in f:
                    if f"/a.txt?{tag} " in line:
                        return line.split(" ", 1)[0]
        time.sleep(0.1)
    raise AssertionError(f"no access log line for {tag}")


def counters(e):
    """proxy_headers and proxy_refused: /proc/net/khttpd, or ktcp-httpd's
    status page asked through a LOCAL header."""
    if e.kind == "kernel":
        with open("/proc/net/khttpd") as f:
            text = f.read()
    else:
        resp = exchange(e.port, v2(0, 0, b""),
                        b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_of(resp) == 200, resp[:200]
        text = resp.split(b"\r\n\r\n", 1)[1].decode()
    c = dict(line.split() for line in text.splitlines() if line.count(" ") == 1)
    return int(c["proxy_headers"]), int(c["proxy_refused"])


GOOD = {
    "v1-tcp4": (b"PROXY TCP4 192.0.2.10 127.0.0.1 40000 80\r\n", "192.0.2.10"),
    "v1-tcp6": (b"PROXY TCP6 2001:db8::10 ::1 40000 80\r\n", "2001:db8::10"),
    "v1-unknown": (b"PROXY UNKNOWN\r\n", "127.0.0.1"),
    "v2-tcp4-tlv": (v2_tcp4("198.51.100.20", 40001, tlvs=TLVS), "198.51.100.20"),
    "v2-tcp6-tlv": (v2_tcp6("2001:db8:0:1::20", 40002, tlvs=TLVS), "2001:db8:0:1::20"),
    # an IPv4-mapped IPv6 client is named as IPv4
    "v2-tcp6-mapped": (v2_tcp6("::ffff:203.0.113.5", 40003), "203.0.113.5"),
    "v2-local": (v2(0, 0x11, b"\x01" * 12), "127.0.0.1"),
}


# split: (case, bytes in the first packet)
SPLITS = [("v1-tcp4", 17), ("v2-tcp6-tlv", 7), ("v2-tcp4-tlv", 20)]


def test_header_names_the_client(proxied):
    """Every kind of header, whole and split over two packets: answered,
    and logged under the client it names (one look at the log for all)."""
    sent = []
    for case in sorted(GOOD):
        header, client = GOOD[case]
        resp = exchange(proxied.port, header, REQ % case.encode())
        assert status_of(resp) == 200, (case, resp[:200])
        assert resp.endswith(b"\r\n\r\nhello\n"), case
        sent.append((case, client))
    for case, split in SPLITS:
        header, client = GOOD[case]
        tag = f"split-{case}"
        resp = exchange(proxied.port, header, REQ % tag.encode(), split=split)
        assert status_of(resp) == 200, (tag, resp[:200])
        sent.append((tag, client))
    if not proxied.proxy_log:
        return  # khttpd: tests/test_khttpd_kernel.py reads its trace event
    got = {tag: log_client(proxied, tag) for tag, _ in sent}
    assert got == dict(sent)


def test_header_and_request_in_one_packet(proxied):
    """The request's bytes that came with the header are the request's."""
    header, client = GOOD["v2-tcp4-tlv"]
    if getattr(proxied, "tls", False):
        pytest.skip("a TLS client sends its ClientHello after the header anyway")
    resp = exchange(proxied.port, header + REQ % b"together")
    assert status_of(resp) == 200, resp[:200]
    assert log_client(proxied, "together") in (None, client)


BAD = {
    "missing": REQ % b"missing",
    "garbage": b"\x00\x01\x02garbage\r\n\r\n",
    "v1-malformed": b"PROXY TCP4 192.0.2.300 127.0.0.1 1 2\r\n" + REQ % b"bad",
    "v1-oversized": b"PROXY UNKNOWN " + b"1" * 200 + b"\r\n" + REQ % b"bad",
    "v2-oversized": v2(1, 0x11, b"\x01" * 12, b"\x00" * 600) + REQ % b"bad",
    "v2-udp": v2(1, 0x12, b"\x01" * 12) + REQ % b"bad",
    "v2-bad-signature": b"\r\n\r\n\x00\r\nQUIX\n" + b"\x21\x11\x00\x0c" + b"\x01" * 12,
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_or_missing_header_closes(proxied, case):
    before = counters(proxied)
    t0 = time.monotonic()
    resp = exchange(proxied.port, BAD[case])
    assert resp == b"", (case, resp[:200])
    # closed at once, not at the idle timeout
    assert time.monotonic() - t0 < IDLE_MS / 1000 * 0.8
    after = counters(proxied)
    assert after[1] > before[1], (before, after)


def test_unfinished_header_closed_at_idle_timeout(proxied):
    before = counters(proxied)
    t0 = time.monotonic()
    resp = exchange(proxied.port, b"PROXY TCP4 192.0.2.1 ", timeout=IDLE_MS / 1000 * 6)
    took = time.monotonic() - t0
    assert resp == b""
    assert IDLE_MS / 1000 * 0.8 <= took < IDLE_MS / 1000 * 5, took
    assert counters(proxied)[1] > before[1]


def test_counters_count_headers(proxied):
    before = counters(proxied)
    assert status_of(exchange(proxied.port, GOOD["v1-tcp4"][0], REQ % b"count")) == 200
    after = counters(proxied)
    # the status page's own header counts too (ktcp-httpd)
    assert after[0] >= before[0] + 1 and after[1] == before[1], (before, after)


def test_curl_haproxy_protocol(proxied):
    """curl's --haproxy-protocol sends a v1 header naming its own address."""
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is not installed")
    base = [curl, "-sS", "--max-time", "10", "--resolve", f"localhost:{proxied.port}:127.0.0.1"]
    ca = tlscert.TLS_PORTS.get(proxied.port)
    if ca:
        base += ["--cacert", ca]
    url = tlscert.url(proxied.port, "/a.txt?curl").replace("127.0.0.1", "localhost")
    before = counters(proxied)
    out = subprocess.run(base + ["--haproxy-protocol", url], capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout == b"hello\n", out
    assert counters(proxied)[0] > before[0]
    assert log_client(proxied, "curl") in (None, "127.0.0.1")
    # and without its header, the same curl is closed on
    out = subprocess.run(base + [url], capture_output=True, timeout=30)
    assert out.returncode != 0 and out.stdout == b"", out
