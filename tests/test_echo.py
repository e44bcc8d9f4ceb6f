"""The echo conformance suite: every echo engine passes the same tests.

On the host the user-space ktcp-echo runs; inside the VM (scripts/vm) kecho.ko
in two workqueue flavours. Bytes are compared exactly.
"""
import os
import random
import resource
import selectors
import socket
import struct
import threading
import time

import pytest

from testlib import connect as connect_port, recv_exact, require_kind
from engines import SUITE

ENGINES = SUITE["echo"]


@pytest.fixture(params=sorted(ENGINES))
def echo_engine(request, tmp_path):
    engine = ENGINES[request.param](str(tmp_path))
    require_kind(engine.kind)
    yield engine
    engine.stop()


@pytest.fixture
def echo(echo_engine):
    """An engine started with default options."""
    return echo_engine.start()






def connect(engine, timeout=10):
    return connect_port(engine.port, timeout)


def echo_roundtrip(s, data):
    """Send while reading, so a message larger than the socket buffers
    cannot deadlock client and server."""
    err = []

    def sender():
        try:
            s.sendall(data)
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=sender)
    t.start()
    got = recv_exact(s, len(data))
    t.join()
    assert not err, err
    return got


def wait_for(pred, timeout=10, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_probe_gone(echo):
    """The readiness probe's connection accepted and closed: else it can be
    counted, or hold a slot, in the middle of a test (a kernel engine's
    accept thread can lag behind under emulation)."""
    def gone():
        c = echo.counters()
        return c["accepted"] >= 1 and c["active"] == 0
    wait_for(gone, what="the readiness probe's connection accepted and closed")


def test_small_message(echo):
    with connect(echo) as s:
        s.sendall(b"hello, ktcp\n")
        assert recv_exact(s, 12) == b"hello, ktcp\n"


def test_one_mebibyte_binary_with_nuls(echo):
    rng = random.Random(1)
    data = bytes(rng.getrandbits(8) for _ in range(1 << 20))
    data = b"\0" * 1000 + data[1000:-1000] + b"\0" * 1000
    assert data.count(0) >= 2000
    with connect(echo, timeout=60) as s:
        assert echo_roundtrip(s, data) == data


def test_many_messages_pipelined(echo):
    msgs = [struct.pack("!I", i) + bytes([i % 256]) * (i % 97) for i in range(2000)]
    data = b"".join(msgs)
    with connect(echo) as s:
        assert echo_roundtrip(s, data) == data


def test_half_close_returns_everything(echo):
    data = os.urandom(200_000)
    with connect(echo, timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        assert bytes(got) == data


def test_thousand_concurrent_clients(echo):
    n = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * n), hard))
    socks = []
    try:
        for _ in range(n):
            socks.append(connect(echo, timeout=30))
        sel = selectors.DefaultSelector()
        want = {}
        for i, s in enumerate(socks):
            msg = f"client {i} ".encode() * (1 + i % 7)
            s.sendall(msg)
            s.setblocking(False)
            want[s] = (msg, bytearray())
            sel.register(s, selectors.EVENT_READ)
        deadline = time.monotonic() + 120
        while want and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                s = key.fileobj
                b = s.recv(65536)
                assert b, "server closed a concurrent client"
                msg, got = want[s]
                got += b
                if len(got) >= len(msg):
                    assert bytes(got) == msg
                    sel.unregister(s)
                    del want[s]
        assert not want, f"{len(want)} clients got no full echo"
        assert echo.counters()["active"] >= n
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: echo.counters()["active"] == 0, what="active to drop to 0")


def test_reset_mid_message_leaves_others_served(echo):
    with connect(echo) as other:
        bad = connect(echo)
        bad.sendall(os.urandom(300_000))  # far more than it will read
        bad.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        bad.close()  # RST with echo data unread
        for i in range(20):
            msg = f"still here {i}".encode()
            other.sendall(msg)
            assert recv_exact(other, len(msg)) == msg
    with connect(echo) as fresh:
        fresh.sendall(b"new")
        assert recv_exact(fresh, 3) == b"new"


def test_counters_move(echo):
    wait_probe_gone(echo)
    before = echo.counters()
    with connect(echo) as s:
        for _ in range(5):
            s.sendall(b"x" * 1000)
            recv_exact(s, 1000)
        mid = echo.counters()
        assert mid["active"] == before["active"] + 1
    after_close = lambda: echo.counters()["active"] == before["active"]
    wait_for(after_close, what="active back to its old value")
    after = echo.counters()
    assert after["accepted"] == before["accepted"] + 1
    assert after["bytes_in"] - before["bytes_in"] == 5000
    assert after["bytes_out"] - before["bytes_out"] == 5000
    assert 5 <= after["messages"] - before["messages"] <= 5000
    assert after["errors"] == before["errors"]


def test_client_that_does_not_read_is_held_back(echo):
    """Backpressure: a client that sends without reading soon finds the
    server no longer reading from it (its send stalls), the server holds at
    most a buffer's worth of its bytes (bytes_in - bytes_out), and everything
    still comes back, in order, once it reads."""
    chunk = os.urandom(1 << 16)
    sent = 0
    with connect(echo, timeout=30) as s:
        s.setblocking(False)
        deadline = time.monotonic() + 5
        stalled_since = None
        while time.monotonic() < deadline and sent < (512 << 20):
            try:
                sent += s.send(chunk[sent % len(chunk):] if sent % len(chunk) else chunk)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 0.5:
                    break  # held back for half a second: the server stopped reading
                time.sleep(0.01)
        assert stalled_since is not None, f"server kept reading {sent} bytes never read back"
        c = echo.counters()
        held = c["bytes_in"] - c["bytes_out"]
        assert 0 <= held <= 64 * 1024, f"server holds {held} bytes of one client"
        s.setblocking(True)
        got = recv_exact(s, sent)
    want = (chunk * (sent // len(chunk) + 1))[:sent]
    assert got == want


def test_idle_timeout_fires(echo_engine):
    echo = echo_engine.start(idle_timeout_ms=500)
    with connect(echo) as idle, connect(echo) as busy:
        t0 = time.monotonic()
        # The busy client talks every 150 ms and must survive the idle one.
        while time.monotonic() - t0 < 2.0:
            busy.sendall(b"ping")
            assert recv_exact(busy, 4) == b"ping"
            time.sleep(0.15)
        idle.settimeout(10)
        try:
            assert idle.recv(1) == b"", "idle client got data instead of EOF"
        except ConnectionResetError:
            pass
        elapsed = time.monotonic() - t0
        assert elapsed < 10
        busy.sendall(b"pong")
        assert recv_exact(busy, 4) == b"pong"
    assert echo.counters()["timeouts"] >= 1


def test_slow_steady_reader_of_a_long_echo_is_not_idle(echo_engine):
    """A client that sends a long message and reads its echo slowly but
    steadily, for several idle timeouts in all, gets all of it: bytes
    leaving the server are activity, not only bytes arriving."""
    echo = echo_engine.start(idle_timeout_ms=1000)
    data = os.urandom(4 << 20)
    with connect(echo, timeout=20) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        err = []

        def sender():
            try:
                s.sendall(data)
            except OSError as e:
                err.append(e)

        t = threading.Thread(target=sender)
        t.start()
        got = bytearray()
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 4.0:  # four timeouts, ~400 KB/s
                b = s.recv(8192)
                assert b, f"closed after {len(got)} bytes, {time.monotonic() - t0:.1f} s"
                got += b
                time.sleep(0.02)
            while len(got) < len(data):  # then the rest at full speed
                b = s.recv(1 << 20)
                assert b, f"closed after {len(got)} bytes"
                got += b
        except ConnectionResetError:
            raise AssertionError(f"reset after {len(got)} bytes")
        finally:
            t.join(30)
        assert not err, err
        assert bytes(got) == data
        # The server may have queued it all early; it must not have timed
        # the connection out while the client read (the close is queued
        # behind the data, so only the counter tells).
        assert echo.counters()["timeouts"] == 0


def test_max_conns_refuses_excess(echo_engine):
    echo = echo_engine.start(max_conns=4)
    wait_probe_gone(echo)
    kept = [connect(echo) for _ in range(4)]
    try:
        for s in kept:  # all four are really being served
            s.sendall(b"a")
            assert recv_exact(s, 1) == b"a"
        extra = connect(echo)
        extra.settimeout(10)
        try:
            extra.sendall(b"b")
            assert extra.recv(1) == b"", "connection past max_conns was served"
        except (ConnectionResetError, BrokenPipeError):
            pass
        extra.close()
        for s in kept:
            s.sendall(b"c")
            assert recv_exact(s, 1) == b"c"
        assert echo.counters()["refused"] >= 1
    finally:
        for s in kept:
            s.close()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_pauses_accept_without_spinning(tmp_path):
    """User engine only (a module has no descriptor limit): with the fd limit
    reached, the server neither spins on its listener nor stops serving, and
    queued clients are served once others leave."""
    require_kind("user")
    from engines import UserEcho
    echo = UserEcho(str(tmp_path)).start(threads=1, nofile=24)
    try:
        first = [connect(echo) for _ in range(12)]
        for s in first:
            s.sendall(b"a")
            assert recv_exact(s, 1) == b"a"
        queued = [connect(echo) for _ in range(12)]  # past the limit: in the backlog
        time.sleep(0.3)
        t0 = cpu_seconds(echo.proc.pid)
        time.sleep(1.0)
        assert cpu_seconds(echo.proc.pid) - t0 < 0.3, "server spins while out of descriptors"
        for s in first:
            s.close()
        for s in queued:
            s.sendall(b"q")
            assert recv_exact(s, 1) == b"q"
        assert echo.counters()["errors"] >= 1  # EMFILE was counted
        for s in queued:
            s.close()
    finally:
        echo.stop()


ECHO_FLAGS = ["--bind", "--port", "--threads", "--model", "--idle-timeout-ms",
              "--max-conns", "--backlog", "--stats-file", "--help"]


def test_user_flags_match_the_other_servers(tmp_path):
    """User engine only: ktcp-echo takes the flags ktcp-httpd takes, with the
    same short forms (-m is --model; it was --max-conns, now -c, and a number
    given to -m is refused with a hint), and listens on every address, IPv6
    and IPv4, without --bind, as the modules do."""
    require_kind("user")
    import subprocess
    from testlib import BUILD, free_port, wait_port
    echo_bin = os.path.join(BUILD, "ktcp-echo")
    r = subprocess.run([echo_bin, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    for flag in ECHO_FLAGS:
        assert flag in r.stdout, flag
    r = subprocess.run([echo_bin, "-m", "100"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--max-conns" in r.stderr, r.stderr
    r = subprocess.run([echo_bin, "--model", "fibers"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--model fibers" in r.stderr, r.stderr
    port = free_port()
    p = subprocess.Popen([echo_bin, "--port", str(port), "-T", "1", "-m", "mn", "-c", "5",
                          "-i", "5000", "--backlog", "16"],
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, proc=p)
        with connect_port(port, 10) as s:
            s.sendall(b"v4")
            assert recv_exact(s, 2) == b"v4"
        try:
            s6 = socket.create_connection(("::1", port), timeout=5)
        except OSError:
            s6 = None  # no IPv6 on this machine
        if s6:
            with s6:
                s6.sendall(b"v6")
                assert recv_exact(s6, 2) == b"v6"
    finally:
        p.terminate()
        p.communicate(timeout=10)
    assert p.returncode == 0


def test_user_stop_cuts_an_echo_waiting_for_its_client(tmp_path):
    """User engine only (kecho's unload is in test_kernel_modules): SIGTERM
    ends ktcp-echo at once even while an echo waits for a client that does
    not read (the idle timeout, 30 s, does not hold the exit), in every
    model, as kecho's unload drops pending echoes."""
    require_kind("user")
    import signal
    from engines import UserEcho
    for model in ("epoll", "mn", "threads"):
        echo = UserEcho(str(tmp_path), model).start(idle_timeout_ms=30000)
        s = connect(echo, timeout=10)
        try:
            s.setblocking(False)
            deadline = time.monotonic() + 5
            stalled_since = None
            while time.monotonic() < deadline:
                try:
                    s.send(b"x" * 65536)
                    stalled_since = None
                except BlockingIOError:
                    stalled_since = stalled_since or time.monotonic()
                    if time.monotonic() - stalled_since > 0.5:
                        break  # the server stopped reading: its echo waits for us
                    time.sleep(0.01)
            wait_for(lambda: echo.counters()["bytes_in"] > echo.counters()["bytes_out"],
                     what="an echo waiting for the client")
            t0 = time.monotonic()
            echo.proc.send_signal(signal.SIGTERM)
            rc = echo.proc.wait(timeout=10)
            assert rc == 0
            assert time.monotonic() - t0 < 3, f"{model}: exit took {time.monotonic() - t0:.1f} s"
        finally:
            s.close()
            echo.stop()
