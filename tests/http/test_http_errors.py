"""Refusals with exact status lines: traversal in every spelling, methods,
limits, framing; and no input takes the server down."""
import socket
import time

import pytest

from docroot import SECRET
from rawhttp import Closed, Conn, get, request

TRAVERSALS = [
    ("/../outside/secret.txt", 403),
    ("/../../../../etc/passwd", 403),
    ("/sub/../../outside/secret.txt", 403),
    ("/%2e%2e/outside/secret.txt", 403),
    ("/%2E%2E/outside/secret.txt", 403),
    ("/.%2e/outside/secret.txt", 403),
    ("/sub/%2e%2e/%2e%2e/outside/secret.txt", 403),
    ("/..%2foutside%2fsecret.txt", 400),
    ("/%2e%2e%2foutside/secret.txt", 400),
    ("/..\\outside\\secret.txt", 400),
    ("/%5c..%5coutside/secret.txt", 400),
    ("/a.txt%00.html", 400),
    ("/%c0%ae%c0%ae/outside/secret.txt", 400),
    ("/%e0%80%ae%e0%80%ae/outside/secret.txt", 400),
    ("/link-out", 403),
    ("/linkdir-out/secret.txt", 403),
    ("/linkdir-out/", 403),
]


@pytest.mark.parametrize("target,status", TRAVERSALS, ids=[t for t, _ in TRAVERSALS])
def test_traversal_refused(http_engine, target, status):
    r = request(http_engine.port, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert r.status == status, target
    assert SECRET not in r.body
    assert b"root:" not in r.body


def test_dotdot_inside_root_is_fine(http_engine):
    r = get(http_engine.port, "/sub/../a.txt")
    assert r.status == 200 and r.body == b"hello\n"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"])
def test_405_with_allow(http_engine, method):
    r = request(http_engine.port, f"{method} /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
    assert r.head.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
    assert r.header("Allow") == "GET, HEAD"


def exact_status(port, raw, status):
    try:
        r = request(port, raw)
    except Closed:
        pytest.fail(f"closed without a response to {raw[:60]!r}")
    assert r.status == status, (raw[:80], r)
    return r


def test_400_garbage(http_engine):
    exact_status(http_engine.port, b"HELLO\r\n\r\n", 400)
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\n\r\n", 400)  # no Host
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400)
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n fold\r\n\r\n", 400)
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\rHost: x\r\n\r\n", 400)


def test_400_proxy_header_on_a_plain_listener(http_engine):
    """A listener not started for the PROXY protocol never reads one: its
    line is a request line, and a bad one (tests/http/test_http_proxy.py has
    the listeners that take it)."""
    exact_status(http_engine.port, b"PROXY TCP4 192.0.2.10 127.0.0.1 40000 80\r\n"
                 b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 400)
    exact_status(http_engine.port, b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c" + b"\x01" * 12 +
                 b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 400)


def test_400_smuggling(http_engine):
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400)
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                 b"Content-Length: 2\r\n\r\nab", 400)


def test_413_body_too_large(http_engine):
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413)


def test_414_uri_too_long(http_engine):
    exact_status(http_engine.port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414)


def test_431_headers_too_large(http_engine):
    big = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"v" * 500) for i in range(80))
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n", 431)
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(300))
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n", 431)


def test_501_unknown_transfer_encoding(http_engine):
    exact_status(http_engine.port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501)


def test_501_unknown_method(http_engine):
    exact_status(http_engine.port, b"BREW /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 501)


def test_505_version(http_engine):
    exact_status(http_engine.port, b"GET /a.txt HTTP/2.0\r\nHost: x\r\n\r\n", 505)
    exact_status(http_engine.port, b"GET /a.txt HTTP/3.1\r\nHost: x\r\n\r\n", 505)


def test_error_closes_connection(http_engine):
    with Conn(http_engine.port) as c:
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
        assert r.header("Connection") == "close"
        assert c.closed_within(3)


JUNK = [
    b"\x00" * 100, b"\r\n" * 5000, b"GET", b"GET /", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"A" * 70000,
    b"\xff\xfe\xfd" * 1000, b"GET /%%%%%% HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=99999999999999999999999-\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: \xff\xff\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip;q=99999999999, ;;;,\r\n\r\n",
    b"GET " + b"/a" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /" + "\u00e9".encode() * 100 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
]


def test_no_input_crashes(http_engine):
    for junk in JUNK:
        s = socket.create_connection(("127.0.0.1", http_engine.port), timeout=5)
        try:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    if not s.recv(65536):
                        break
                except (ConnectionResetError, socket.timeout):
                    break
        finally:
            s.close()
        r = get(http_engine.port, "/a.txt")
        assert r.status == 200 and r.body == b"hello\n", junk[:40]
