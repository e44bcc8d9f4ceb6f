"""A connection reaches the server with its first bytes (TCP_DEFER_ACCEPT
on every listener: ktcp-httpd's plain and TLS ports in each model,
khttpd.ko's in each mode): one that has sent nothing yet is neither
accepted nor counted, wakes no worker and takes no slot, and is served as
soon as its request (or ClientHello) arrives. One that never speaks is
handed over about a second later (after a repeated SYN-ACK), and the
server's idle timeout ends it, so the kernel keeps nothing for it."""
import socket
import time

import pytest

from testlib import require_kind
from engines import HTTPD_MODELS, KernelHttpd, UserHttpd, tlscert

IDLE = 20
USER = [f"ktcp-httpd-{m}" for m in HTTPD_MODELS]
KERNEL = ["khttpd", "khttpd-kthread"]


def start(name, tmp_path, tls=False, **opts):
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    root.chmod(0o755)
    (root / "f").write_bytes(b"deferred\n")
    (root / "f").chmod(0o644)
    if name in KERNEL:
        require_kind("kernel")
        e = KernelHttpd("kthread" if name.endswith("kthread") else None)
    else:
        require_kind("user")
        e = UserHttpd(name.rsplit("-", 1)[1], str(tmp_path), tls=tls)
        opts["status_path"] = "/-/status"
    return e.start(str(root), **opts)


def get(sock, port):
    s = tlscert.wrap(sock, port)
    s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    return data


def own(e):
    """The connections a look at the counters makes: ktcp-httpd's status
    page takes one, khttpd's /proc file none."""
    return 0 if isinstance(e, KernelHttpd) else 1


def settled(e):
    """The accepted count once nothing but the looks is accepted any more:
    the start's readiness probe (a connect and a close, whose FIN hands it
    over) may be taken a moment after the server is up."""
    last = e.counters()["accepted"]
    for _ in range(50):
        time.sleep(0.1)
        now = e.counters()["accepted"]
        if now - last == own(e):
            return now
        last = now
    raise AssertionError(f"connections still being accepted: {e.counters()}")


CASES = [(n, False) for n in USER + KERNEL] + [(n, True) for n in USER]


@pytest.mark.parametrize("name,tls", CASES,
                         ids=[n + ("-https" if t else "") for n, t in CASES])
def test_a_silent_connection_is_not_accepted_until_it_speaks(name, tls, tmp_path):
    e = start(name, tmp_path, tls=tls)
    silent = []
    try:
        before = settled(e)
        silent = [socket.create_connection(("127.0.0.1", e.port), timeout=10)
                  for _ in range(IDLE)]
        time.sleep(0.3)
        assert e.counters()["accepted"] - before == own(e), "accepted before it spoke"
        for s in silent:
            assert get(s, e.port).startswith(b"HTTP/1.1 200"), "not served once it spoke"
        assert e.counters()["accepted"] - before == IDLE + 2 * own(e)
    finally:
        for s in silent:
            s.close()
        e.stop()


@pytest.mark.parametrize("name", USER + KERNEL)
def test_a_connection_that_never_speaks_is_ended_by_the_idle_timeout(name, tmp_path):
    e = start(name, tmp_path, idle_timeout_ms=500)
    try:
        s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
        t0 = time.monotonic()
        try:
            end = s.recv(1)
        except ConnectionResetError:
            end = b""
        took = time.monotonic() - t0
        s.close()
        assert end == b"", end
        # handed over after about a second, then the 500 ms idle timeout
        assert 0.4 < took < 8, took
        assert e.counters()["accepted"] >= 1 + own(e), e.counters()
    finally:
        e.stop()
