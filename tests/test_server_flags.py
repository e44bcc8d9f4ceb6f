"""The flags the user-space servers on the runtime share (user/rt/rt-cli.c):
ktcp-echo, ktcp-msg-server and ktcp-kcm-server list them with one text and
one default each, and the two message servers honour the runtime's
--model, --max-conns and --idle-timeout-ms (docs/operating.md, "Flags").

ktcp-kcm-server serves only where AF_KCM exists: inside the VM
(KTCP_ENGINES=kernel); the twin runs on the host and in the VM."""
import os
import struct
import subprocess
import time

import pytest

from testlib import BUILD, connect, in_vm, recv_exact, run, selected_kinds
from engines import KcmServer, MsgServer

SERVERS = ["ktcp-echo", "ktcp-msg-server", "ktcp-kcm-server"]
# flags whose --help line is the same, word for word, in every server
SAME_LINE = ["-b, --bind ADDR", "-i, --idle-timeout-ms MS", "-c, --max-conns N",
             "--backlog N", "-s, --stats-file PATH", "--version", "-h, --help"]


def help_lines(exe):
    """--help's option lines, keyed by their flag column, each with its
    continuation lines."""
    out = run([os.path.join(BUILD, exe), "--help"]).stdout
    lines, key = {}, None
    for line in out.splitlines():
        if line.startswith("  -") or line.startswith("      --"):
            key = line[:29].strip()
            lines[key] = line[29:].strip()
        elif key and line.startswith(" " * 29) and line.strip():
            lines[key] += " " + line.strip()
        else:
            key = None
    return lines


def test_shared_flags_read_alike():
    helps = {exe: help_lines(exe) for exe in SERVERS}
    for flag in SAME_LINE:
        texts = {exe: helps[exe].get(flag) for exe in SERVERS}
        assert None not in texts.values(), (flag, texts)
        assert len(set(texts.values())) == 1, (flag, texts)
    assert helps["ktcp-echo"]["-m, --model MODEL"] == helps["ktcp-msg-server"]["-m, --model MODEL"]
    # the KCM server has one model: no -m in its help, and -m is refused
    assert "-m, --model MODEL" not in helps["ktcp-kcm-server"]
    for exe in ("ktcp-msg-server", "ktcp-kcm-server"):
        assert "default 12346" in helps[exe]["-p, --port PORT"]
    r = run([os.path.join(BUILD, "ktcp-kcm-server"), "--model", "epoll"], check=False)
    assert r.returncode == 2 and "one model" in r.stderr, r.stderr
    r = run([os.path.join(BUILD, "ktcp-msg-server"), "--model", "fibers"], check=False)
    assert r.returncode == 2 and "--model fibers" in r.stderr, r.stderr


def kcm_why_not():
    """None when ktcp-kcm-server can run here, else why not."""
    if "kernel" not in selected_kinds() or not in_vm():
        return "AF_KCM is used only inside the project VM (KTCP_ENGINES=kernel scripts/vm)"
    r = subprocess.run(["modprobe", "kcm"], capture_output=True, text=True)
    return f"no kcm module in this guest: {r.stderr.strip()}" if r.returncode else None


def Server(exe, tmpdir, *args):
    """The message server exe with args, its counters in tmpdir."""
    cls = {"ktcp-msg-server": ServerFlags, "ktcp-kcm-server": KcmServerFlags}[exe]
    return cls(tmpdir).start(threads=None, args=args)


class ServerFlags(MsgServer):
    def wait_idle(self):
        """Until the server holds no connection (wait_port's probe gone)."""
        deadline = time.monotonic() + 20
        while self.counters()["active"] != 0:
            assert time.monotonic() < deadline, "connections never closed"
            time.sleep(0.05)


class KcmServerFlags(ServerFlags, KcmServer):
    pass


@pytest.fixture(params=["ktcp-msg-server", "ktcp-kcm-server"])
def msg_exe(request):
    if request.param == "ktcp-kcm-server":
        why = kcm_why_not()
        if why:
            pytest.skip(why)
    elif "user" not in selected_kinds() and not in_vm():
        pytest.skip("the plain twin runs on the host or in the VM")
    return request.param


def frame(tag, body=b""):
    payload = struct.pack(">II", 0, tag) + body
    return struct.pack(">I", len(payload)) + payload


def recv_frame(s):
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    return struct.pack(">I", n) + recv_exact(s, n)


def expect_closed(s, timeout):
    s.settimeout(timeout)
    try:
        assert s.recv(4096) == b""
    except ConnectionResetError:
        pass


@pytest.mark.parametrize("model", ["threads", "epoll", "mn"])
def test_msg_server_runs_every_model(tmp_path, model):
    """The twin is a handler on the runtime: each of its models answers a
    connection's pipelined frames in order, and SIGTERM ends it."""
    if "user" not in selected_kinds() and not in_vm():
        pytest.skip("the plain twin runs on the host or in the VM")
    srv = Server("ktcp-msg-server", str(tmp_path), "--model", model, "--threads", "2")
    try:
        with connect(srv.port) as s:
            sent = [frame(i, bytes([i]) * i) for i in range(60)]
            s.sendall(b"".join(sent))
            assert [recv_frame(s) for _ in sent] == sent
        assert srv.counters()["messages"] == 60
    finally:
        srv.stop()


def test_max_conns_refuses_past_the_limit(msg_exe, tmp_path):
    srv = Server(msg_exe, str(tmp_path), "--max-conns", "2", "--threads", "1")
    try:
        srv.wait_idle()
        held = [connect(srv.port) for _ in range(2)]
        for i, s in enumerate(held):
            s.sendall(frame(i))
            assert recv_frame(s) == frame(i)
        with connect(srv.port) as third:
            third.sendall(frame(9))
            expect_closed(third, 10)
        assert srv.counters()["refused"] == 1
        for i, s in enumerate(held):  # the two served go on
            s.sendall(frame(10 + i))
            assert recv_frame(s) == frame(10 + i)
            s.close()
    finally:
        srv.stop()


def test_idle_timeout_closes_idle_and_half_sent(msg_exe, tmp_path):
    """A client silent for --idle-timeout-ms is closed, after a whole frame
    and in the middle of one; a client that keeps sending is not."""
    srv = Server(msg_exe, str(tmp_path), "--idle-timeout-ms", "700", "--threads", "2")
    try:
        srv.wait_idle()
        with connect(srv.port) as idle, connect(srv.port) as half, connect(srv.port) as busy:
            idle.sendall(frame(1))
            assert recv_frame(idle) == frame(1)
            half.sendall(frame(2))
            assert recv_frame(half) == frame(2)
            half.sendall(struct.pack(">I", 100) + b"part")
            t0 = time.monotonic()
            for i in range(8):  # 1.6 s of traffic, each gap shorter than the timeout
                busy.sendall(frame(i))
                assert recv_frame(busy) == frame(i)
                time.sleep(0.2)
            expect_closed(idle, 10)
            expect_closed(half, 10)
            assert time.monotonic() - t0 < 10
            busy.sendall(frame(99))
            assert recv_frame(busy) == frame(99)
        assert srv.counters()["timeouts"] == 2
    finally:
        srv.stop()
