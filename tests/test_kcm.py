"""The message-server suite: ktcp-kcm-server (AF_KCM) and its plain-TCP twin
ktcp-msg-server pass the same tests.

A frame is a 4-byte big-endian length and a body whose first 4 bytes ask for
work_us of work; the server answers with the frame unchanged (docs/kcm.md).
The twin answers each connection in order at any thread count. KCM spreads
one connection's messages over its workers, so with more than one worker its
answers to pipelined requests may come in another order: the tests that
check order run every engine with one worker, and the others check that
every frame comes back whole, exactly once, on its own connection.

On the host (KTCP_ENGINES=user) the twin runs and the KCM engine skips: the
host kernel has no AF_KCM. Inside the VM (KTCP_ENGINES=kernel) both run.
"""
import ctypes
import errno
import os
import random
import selectors
import socket
import struct
import subprocess
import threading
import time

import pytest

from testlib import BUILD, connect as connect_port, free_port, in_vm, recv_exact, run, selected_kinds
from engines import SUITE, KcmServer

MAX_MSG = 4096  # the suite runs the servers with --max-msg 4096


ENGINES = SUITE["msg"]


def unavailable(engine):
    """None when this engine runs in this test run, else why not: the twin
    runs on the host or in the VM, the KCM server only in a VM selected for
    kernel engines whose kernel has AF_KCM."""
    if engine.kind == "user":
        if "user" in selected_kinds() or in_vm():
            return None
        return "the plain twin runs on the host or in the VM"
    if "kernel" not in selected_kinds():
        return (f"AF_KCM needs the guest kernel's kcm module: runs inside the VM "
                f"(make check-vm); KTCP_ENGINES={os.environ.get('KTCP_ENGINES', 'user')}")
    return engine.unavailable()


@pytest.fixture(params=sorted(ENGINES))
def msg_engine(request, tmp_path):
    engine = ENGINES[request.param](str(tmp_path))
    why = unavailable(engine)
    if why:
        pytest.skip(why)
    yield engine
    engine.stop()


@pytest.fixture
def server(msg_engine):
    return msg_engine.start(threads=2, max_msg=MAX_MSG)


@pytest.fixture
def server1(msg_engine):
    """One worker: every engine promises order."""
    return msg_engine.start(threads=1, max_msg=MAX_MSG)


def frame(body):
    return struct.pack(">I", len(body)) + body


def request(tag, payload=b"", work_us=0):
    return frame(struct.pack(">II", work_us, tag) + payload)






# The parser's name in the kernel (the BPF program's function name).
PARSER_PROG_NAME = b"ktcp_kcm_len"


def loaded_parsers():
    """How many KCM length parsers the kernel holds now, counted by the
    kernel: every loaded BPF program is walked by id (bpf(2) with
    BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD),
    so programs a server loaded and then closed, but whose psock still holds
    them, count too. Needs root (the VM)."""
    libc = ctypes.CDLL(None, use_errno=True)
    nr_bpf = 321  # x86_64
    prog_get_next_id, prog_get_fd_by_id, obj_get_info_by_fd = 11, 13, 15

    def bpf(cmd, attr):
        r = libc.syscall(nr_bpf, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
        return r, ctypes.get_errno()

    count, prog_id = 0, 0
    for _ in range(100000):  # bounded: far more programs than a guest holds
        attr = (ctypes.c_uint32 * 4)(prog_id, 0, 0, 0)
        r, err = bpf(prog_get_next_id, attr)
        if r < 0:
            assert err == errno.ENOENT, os.strerror(err)
            return count
        prog_id = attr[1]
        attr = (ctypes.c_uint32 * 4)(prog_id, 0, 0, 0)
        fd, err = bpf(prog_get_fd_by_id, attr)
        if fd < 0:
            assert err == errno.ENOENT, os.strerror(err)  # unloaded meanwhile
            continue
        info = ctypes.create_string_buffer(256)
        attr = (ctypes.c_uint32 * 4)(fd, 256, 0, 0)
        ctypes.cast(ctypes.byref(attr, 8), ctypes.POINTER(ctypes.c_uint64))[0] = \
            ctypes.addressof(info)
        r, err = bpf(obj_get_info_by_fd, attr)
        os.close(fd)
        assert r == 0, os.strerror(err)
        prog_type = struct.unpack_from("<I", info.raw, 0)[0]
        name = info.raw[64:80].split(b"\0")[0]
        if prog_type == 1 and name == PARSER_PROG_NAME:  # BPF_PROG_TYPE_SOCKET_FILTER
            count += 1
    raise AssertionError("more than 100000 BPF programs")


def wait_parsers(want, timeout=10):
    """Wait until the kernel holds want parsers (a psock may drop its
    reference a little after the unattach); fail with the last count."""
    deadline = time.monotonic() + timeout
    while True:
        n = loaded_parsers()
        if n == want or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def connect(engine, timeout=20):
    return connect_port(engine.port, timeout)


def recv_frames(s, count):
    out = []
    for _ in range(count):
        (n,) = struct.unpack(">I", recv_exact(s, 4))
        out.append(struct.pack(">I", n) + recv_exact(s, n))
    return out


def expect_closed(s, timeout=20):
    """The server ends this connection: EOF or reset, with no reply."""
    s.settimeout(timeout)
    try:
        data = s.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the connection closed, got {data[:40]!r}"


def check_answers(engine, sent, got):
    if engine.ordered():
        assert got == sent
    else:
        assert sorted(got) == sorted(sent)


def test_one_message(server):
    with connect(server) as s:
        req = request(1, b"hello")
        s.sendall(req)
        assert recv_frames(s, 1) == [req]


def test_empty_and_short_bodies(server):
    """A body shorter than the 4-byte work field asks for no work."""
    with connect(server) as s:
        sent = [frame(b""), frame(b"a"), frame(b"abc"), frame(b"abcd"), request(7)]
        for f in sent:
            s.sendall(f)
            assert recv_frames(s, 1) == [f]


def test_largest_message(server):
    with connect(server) as s:
        req = frame(struct.pack(">II", 0, 9) + bytes(range(256)) * ((MAX_MSG - 8) // 256)
                    + b"z" * ((MAX_MSG - 8) % 256))
        assert len(req) == 4 + MAX_MSG
        s.sendall(req)
        assert recv_frames(s, 1) == [req]


def test_message_sent_byte_by_byte(server1):
    """Every byte in its own segment, header bytes included."""
    with connect(server1) as s:
        sent = [request(i, bytes([i]) * (i * 5)) for i in range(3)]
        for f in sent:
            for b in f:
                s.send(bytes([b]))
                time.sleep(0.002)
        assert recv_frames(s, 3) == sent


def test_odd_splits(server1):
    """Frames cut at random places: a segment ends inside a header, inside a
    body, or just after a frame; the next one starts mid-frame."""
    rng = random.Random(6)
    sent = [request(i, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
            for i in range(40)]
    stream = b"".join(sent)
    with connect(server1) as s:
        pos = 0
        while pos < len(stream):
            n = rng.choice([1, 2, 3, 5, 7, 13, 61, 250, 777])
            s.send(stream[pos:pos + n])
            pos += n
            time.sleep(0.001)
        assert recv_frames(s, len(sent)) == sent


def test_many_messages_in_one_segment(server1):
    """Fifty frames of different lengths in one send (one segment on
    loopback), then more that start in the middle of a segment: each is
    delivered whole and answered in order."""
    sent = [request(i, b"x" * (i % 11)) for i in range(50)]
    with connect(server1) as s:
        s.sendall(b"".join(sent))
        assert recv_frames(s, 50) == sent
        tail = [request(100 + i, b"y" * i) for i in range(5)]
        blob = b"".join(tail)
        s.sendall(blob[:7])
        time.sleep(0.05)
        s.sendall(blob[7:])
        assert recv_frames(s, 5) == tail


def test_pipelined_with_workers(server):
    """Two workers: every frame comes back whole and exactly once (in order
    for the twin)."""
    sent = [request(i, bytes([i % 256]) * (i % 37), work_us=200 if i % 3 == 0 else 0)
            for i in range(200)]
    with connect(server) as s:
        s.sendall(b"".join(sent))
        got = recv_frames(s, len(sent))
    check_answers(server, sent, got)


def test_work_is_done(server):
    """work_us is spent before the answer (a lower bound only)."""
    with connect(server) as s:
        t0 = time.monotonic()
        req = request(1, b"w", work_us=100_000)
        s.sendall(req)
        assert recv_frames(s, 1) == [req]
        assert time.monotonic() - t0 >= 0.1


def test_kcm_spreads_one_connection_over_workers(server):
    """The point of KCM: one client's messages reach every worker. The twin
    keeps a connection on one worker."""
    with connect(server) as s:
        sent = [request(i, b"", work_us=2000) for i in range(100)]
        s.sendall(b"".join(sent))
        got = recv_frames(s, len(sent))
    check_answers(server, sent, got)
    c = server.counters()
    per_worker = [c[f"worker{i}_messages"] for i in range(2)]
    assert sum(per_worker) >= 100
    if server.kind == "kernel":
        assert min(per_worker) > 0, per_worker
    else:
        assert min(per_worker) == 0, per_worker


def test_hundred_clients_get_only_their_own_replies(server):
    clients, per_client = 100, 10
    socks = [connect(server) for _ in range(clients)]
    sel = selectors.DefaultSelector()
    expected, got, pending = {}, {}, {}
    try:
        for cid, s in enumerate(socks):
            msgs = [request(cid * 1000 + k, f"client {cid} msg {k}".encode()) for k in range(per_client)]
            expected[cid] = msgs
            got[cid] = b""
            pending[cid] = b"".join(msgs)
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, cid)
        deadline = time.monotonic() + 60
        want = {cid: len(pending[cid]) for cid in pending}
        while any(len(got[c]) < want[c] for c in got):
            assert time.monotonic() < deadline, "replies did not all come back"
            for key, ev in sel.select(timeout=1):
                cid, s = key.data, key.fileobj
                if ev & selectors.EVENT_WRITE and pending[cid]:
                    n = s.send(pending[cid])
                    pending[cid] = pending[cid][n:]
                    if not pending[cid]:
                        sel.modify(s, selectors.EVENT_READ, cid)
                if ev & selectors.EVENT_READ:
                    data = s.recv(65536)
                    assert data, f"client {cid} closed by the server"
                    got[cid] += data
        for cid in got:
            frames, buf = [], got[cid]
            while buf:
                (n,) = struct.unpack(">I", buf[:4])
                frames.append(buf[:4 + n])
                buf = buf[4 + n:]
            check_answers(server, expected[cid], frames)
    finally:
        sel.close()
        for s in socks:
            s.close()


def test_oversized_frame_closes_only_that_connection(server):
    with connect(server) as good:
        good.sendall(request(1, b"before"))
        assert recv_frames(good, 1) == [request(1, b"before")]
        with connect(server) as bad:
            bad.sendall(struct.pack(">I", MAX_MSG + 1) + b"\0" * 64)
            expect_closed(bad)
        with connect(server) as bad2:  # served first, then a huge frame
            bad2.sendall(request(5, b"ok"))
            assert recv_frames(bad2, 1) == [request(5, b"ok")]
            bad2.sendall(struct.pack(">I", 0xFFFFFFF0) + b"\1" * 10)
            expect_closed(bad2)
        good.sendall(request(2, b"after"))
        assert recv_frames(good, 1) == [request(2, b"after")]
    assert server.counters()["too_big"] == 2
    with connect(server) as s:
        s.sendall(request(3, b"new client"))
        assert recv_frames(s, 1) == [request(3, b"new client")]


@pytest.mark.parametrize("how", ["close", "reset"])
def test_client_vanishing_mid_message(server, how):
    with connect(server) as other:
        for i in range(5):
            gone = connect(server)
            gone.sendall(request(9, b"complete"))
            assert recv_frames(gone, 1) == [request(9, b"complete")]
            gone.sendall(struct.pack(">I", 1000) + b"half a message")
            time.sleep(0.02)
            if how == "reset":
                gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            gone.close()
            other.sendall(request(i, b"still here"))
            assert recv_frames(other, 1) == [request(i, b"still here")]
    deadline = time.monotonic() + 20
    while server.counters()["active"] != 0:
        assert time.monotonic() < deadline, "vanished clients were never closed"
        time.sleep(0.05)
    assert server.alive()


def test_kcm_loads_one_parser_for_all_connections(msg_engine):
    """The length parser is loaded once, when the server starts, and the
    same program is attached to every connection's mux: the kernel holds
    one parser whether the server has 1 or 40 clients, and each client's
    stream is still cut at its own message boundaries."""
    if msg_engine.kind != "kernel":
        pytest.skip("only the KCM server has a BPF parser")
    before = loaded_parsers()
    server = msg_engine.start(threads=2, max_msg=MAX_MSG)
    assert wait_parsers(before + 1) == before + 1
    socks = [connect(server) for _ in range(40)]
    try:
        # Different positions in each stream: client i first sends i bytes
        # of frames, then a batch of frames in one segment.
        for i, s in enumerate(socks):
            first = [request(i * 100 + k, b"p" * k) for k in range(i % 4)]
            if first:
                s.sendall(b"".join(first))
                check_answers(server, first, recv_frames(s, len(first)))
        for i, s in enumerate(socks):
            batch = [request(i * 100 + 50 + k, bytes([i]) * (k * 3)) for k in range(6)]
            s.sendall(b"".join(batch))
            check_answers(server, batch, recv_frames(s, len(batch)))
        assert wait_parsers(before + 1) == before + 1
        assert server.counters()["accepted"] >= 40  # and wait_port's probe
    finally:
        for s in socks:
            s.close()
    server.stop()
    assert wait_parsers(before) == before


def test_same_four_tuple_starts_a_fresh_stream(server1):
    """A new connection from the address and port of one that ended (reset,
    so no TIME_WAIT keeps the port) starts at its own first byte: nothing the
    parser knew of the old stream is applied to the new one."""
    port = None
    for round_ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port or 0))
        port = s.getsockname()[1]
        s.settimeout(20)
        s.connect(("127.0.0.1", server1.port))
        # Leave the old stream with a partial frame at a different offset
        # each round, then vanish with a reset.
        sent = [request(round_ * 10 + k, b"r" * (round_ * 7 + k)) for k in range(3)]
        s.sendall(b"".join(sent))
        assert recv_frames(s, 3) == sent
        s.sendall(struct.pack(">I", 500) + b"part" * round_)
        time.sleep(0.05)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    deadline = time.monotonic() + 20
    while server1.counters()["active"] != 0:
        assert time.monotonic() < deadline, "reset clients were never closed"
        time.sleep(0.05)
    assert server1.counters()["errors"] == 0


def test_malformed_frames(server):
    """Lengths the parser must refuse end only their connection: just above
    the limit, the largest 32-bit value, and a header whose bytes arrive one
    at a time; a header cut short by the client's FIN is a vanished client.
    A frame of exactly the limit still passes on a fresh connection."""
    for hdr in (struct.pack(">I", MAX_MSG + 1), b"\xff\xff\xff\xff", b"\x80\0\0\0"):
        with connect(server) as bad:
            bad.sendall(request(1, b"first"))
            assert recv_frames(bad, 1) == [request(1, b"first")]
            for b in hdr:
                bad.send(bytes([b]))
                time.sleep(0.01)
            expect_closed(bad)
    with connect(server) as short:
        short.sendall(b"\0\0")
        time.sleep(0.05)
        short.shutdown(socket.SHUT_WR)
        expect_closed(short)
    c = server.counters()
    assert c["too_big"] == 3, c
    with connect(server) as s:
        req = frame(b"m" * MAX_MSG)
        s.sendall(req)
        assert recv_frames(s, 1) == [req]


def test_kcm_server_runs_as_installed(msg_engine, tmp_path):
    """The parser travels inside the binary: a copy of the server alone, as
    make install puts it (install -m 0755), started from another directory,
    loads it and serves."""
    if msg_engine.kind != "kernel":
        pytest.skip("only the KCM server has a BPF parser")
    bindir = tmp_path / "usr" / "bin"
    bindir.mkdir(parents=True)
    exe = bindir / "ktcp-kcm-server"
    subprocess.run(["install", "-m", "0755", msg_engine.exe, str(exe)], check=True)
    engine = KcmServer(str(tmp_path), exe=str(exe), name="ktcp-kcm-server-installed")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        engine.start(threads=1, max_msg=MAX_MSG)
    finally:
        os.chdir(cwd)
    try:
        with connect(engine) as s:
            sent = [request(k, b"installed" * k) for k in range(5)]
            s.sendall(b"".join(sent))
            assert recv_frames(s, 5) == sent
    finally:
        engine.stop()


def test_server_closes_everything_on_sigterm(server):
    socks = [connect(server) for _ in range(10)]
    for i, s in enumerate(socks):
        s.sendall(request(i))
        assert recv_frames(s, 1) == [request(i)]
    server.stop()  # asserts exit status 0 within 20 s
    for s in socks:
        expect_closed(s)
        s.close()


def test_help_and_bad_arguments(msg_engine):
    r = run([msg_engine.exe, "--help"])
    for flag in ("--port", "--threads", "--max-msg", "--bind", "--stats-file"):
        assert flag in r.stdout
    assert "default 65536" in r.stdout and "default 12346" in r.stdout
    r = run([msg_engine.exe, "--max-msg", "nope"], check=False)
    assert r.returncode == 2 and "--max-msg nope" in r.stderr
    # -m is --model in every other server: here it is refused, not taken as
    # the largest body it once meant
    assert "-m," not in r.stdout
    r = run([msg_engine.exe, "-m", "100"], check=False)
    assert r.returncode == 2 and "--max-msg" in r.stderr


def test_kcm_unavailable_is_named():
    """Where socket(AF_KCM) fails (the host kernel), the server says why."""
    try:
        socket.socket(41, socket.SOCK_SEQPACKET, 0).close()
        pytest.skip("AF_KCM works here: nothing to report")
    except OSError:
        pass
    r = run([os.path.join(BUILD, "ktcp-kcm-server"), "--port", str(free_port())], check=False)
    assert r.returncode == 1
    assert "AF_KCM unavailable: modprobe kcm (EAFNOSUPPORT" in r.stderr
