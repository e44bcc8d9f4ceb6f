"""Request bodies a client can make endless: a chunk extension that never
ends, extensions repeated chunk after chunk, trailers that never end. Each
is answered (after the request's own response) with its error status and
a close, within a bounded number of bytes, while other clients are served.

The flood is bounded by the test: at most FLOOD_BUDGET bytes or
FLOOD_SECONDS. A server that keeps reading past either fails the test."""
import errno
import select
import socket
import ssl
import threading
import time

import pytest

from rawhttp import Conn

FLOOD_BUDGET = 8 << 20
FLOOD_SECONDS = 20
# What the server may swallow before it answers: its limit is 16 KiB of
# extensions per body, then come socket buffers on both sides (the client's
# send buffer is pinned small; the server's receive buffer may autotune).
ANSWERED_WITHIN = 4 << 20

HEAD = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

FLOODS = {
    # "1;aaaa..." forever: one chunk line that never reaches its CR
    "endless-extension": (b"1;", b"a" * 4096, 400),
    # legal-looking 1-byte chunks, each with a 1000-byte extension
    "repeated-extensions": (b"", b"1;" + b"e" * 1000 + b"\r\nx\r\n", 400),
    # the last chunk, then one trailer field that never ends
    "endless-trailer": (b"0\r\nX-Flood: ", b"t" * 4096, 431),
}


class Flood:
    """One connection pushing prefix + unit * n until the server closes it,
    reading whatever comes back meanwhile."""

    def __init__(self, port, prefix, unit):
        self.conn = Conn(port, timeout=10)
        s = self.conn.sock
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
        s.setblocking(False)
        self.pending = prefix
        self.unit = unit
        self.sent = 0
        self.sent_when_answered = None  # bytes sent when the 2nd head arrived
        self.closed = False

    def run(self):
        s = self.conn.sock
        deadline = time.monotonic() + FLOOD_SECONDS
        sending = True
        while time.monotonic() < deadline:
            if sending and self.sent >= FLOOD_BUDGET:
                sending = False
                # the whole budget went in: a few seconds more for an answer
                deadline = min(deadline, time.monotonic() + 3)
            r, w, _ = select.select([s], [s] if sending else [], [], 0.2)
            if r:
                try:
                    data = s.recv(65536)
                except (ConnectionResetError, ssl.SSLEOFError):
                    data = b""
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    continue  # (over TLS: a record not yet whole)
                if not data:
                    self.closed = True
                    break
                self.conn.buf += data
                if self.sent_when_answered is None and self.conn.buf.count(b"HTTP/1.1 ") >= 2:
                    self.sent_when_answered = self.sent
            if w and sending:
                if not self.pending:
                    self.pending = self.unit * 16
                try:
                    n = s.send(self.pending)
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    continue
                except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
                    sending = False  # over TLS: the server closed
                    continue
                except OSError as e:
                    # reset or EPIPE: the server closed; read what it said
                    assert e.errno in (errno.ECONNRESET, errno.EPIPE), e
                    sending = False
                    continue
                self.sent += n
                self.pending = self.pending[n:]
        self.conn.sock.setblocking(True)
        return self


def keep_fetching(port, stop, served, errors):
    """Another client, one keep-alive connection, served all along: each
    entry of served is (sent at, answered at)."""
    try:
        with Conn(port, timeout=10) as c:
            while not stop.is_set():
                t = time.monotonic()
                c.send(b"GET /a.txt HTTP/1.1\r\nHost: y\r\n\r\n")
                r = c.read_response()
                assert r.status == 200 and r.body == b"hello\n", r
                served.append((t, time.monotonic()))
                time.sleep(0.02)
    except Exception as e:  # reported by the test thread
        errors.append(repr(e))


def wait_served(served, n, seconds):
    deadline = time.monotonic() + seconds
    while len(served) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(served) >= n


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_body_flood_refused_and_closed(http_engine, kind):
    prefix, unit, status = FLOODS[kind]
    stop = threading.Event()
    served, errors = [], []
    other = threading.Thread(target=keep_fetching,
                             args=(http_engine.port, stop, served, errors))
    other.start()
    f = Flood(http_engine.port, HEAD + prefix, unit)
    try:
        assert wait_served(served, 1, 10), "the other client was never served"
        t0 = time.monotonic()
        f.run()
        elapsed = time.monotonic() - t0
        # served again once the flood has started (it may be over already)
        again = wait_served(served, len(served) + 2, 10)
        first = second = None
        if f.closed and f.sent_when_answered is not None:
            first = f.conn.read_response(timeout=5)
            second = f.conn.read_response(timeout=5)
    finally:
        f.conn.close()
        stop.set()
        other.join(timeout=20)
    assert not other.is_alive(), "the other client hung"
    assert not errors, errors
    assert f.closed, (f"{kind}: still open after {f.sent} bytes in {elapsed:.1f} s "
                      f"(budget {FLOOD_BUDGET} bytes / {FLOOD_SECONDS} s)")
    assert f.sent_when_answered is not None, f"{kind}: closed without an answer"
    assert f.sent_when_answered <= ANSWERED_WITHIN, (
        f"{kind}: {f.sent_when_answered} bytes sent before the answer")
    # the request's own answer, then the body's error and the close
    assert first.status == 200 and first.body == b"hello\n", first
    assert second.status == status, second
    assert second.header("Connection") == "close"
    assert again, "the other client was not served after the flood began"
    slowest = max(done - sent for sent, done in served)
    assert slowest < 3, f"the other client waited {slowest:.1f} s for an answer"


def test_extension_under_limit_is_fine(http_engine):
    """Extensions a real client might send still pass, chunk after chunk."""
    ext = b";name=" + b"v" * 200
    body = b"".join(b"4" + ext + b"\r\nabcd\r\n" for _ in range(40))
    with Conn(http_engine.port) as c:
        c.send(HEAD + body + b"0" + ext + b"\r\nX-T: 1\r\n\r\n"
               b"GET /p1.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.read_response().body == b"hello\n"
        assert c.read_response().body == b"pipelined file 1\n" * 2
