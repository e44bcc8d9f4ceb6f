"""The flags the user-space servers on the runtime share (user/rt/rt-cli.c):
ktcp-httpd, ktcp-echo, ktcp-msg-server and ktcp-kcm-server take them
through one parser, list them with one text and one default each and
refuse a bad value with one message (ktcp-httpd from its --config file
too), and the two message servers honour the runtime's --model,
--max-conns and --idle-timeout-ms (docs/operating.md, "Flags").

ktcp-kcm-server serves only where AF_KCM exists: inside the VM
(KTCP_ENGINES=kernel); the twin runs on the host and in the VM."""
import os
import signal
import struct
import subprocess
import time

import pytest

from testlib import BUILD, connect, free_port, in_vm, recv_exact, run, selected_kinds, wait_port
from engines import KcmServer, MsgServer

SERVERS = ["ktcp-echo", "ktcp-msg-server", "ktcp-kcm-server", "ktcp-httpd"]
# flags whose --help line is the same, word for word, in every server
# that takes them (ktcp-httpd has no -s: its counters are at --status-path)
SAME_LINE = ["-b, --bind ADDR", "-i, --idle-timeout-ms MS", "-c, --max-conns N",
             "--max-conns-per-ip N", "--busy-poll-us US", "--accept-steer cpu|hash",
             "--backlog N", "-s, --stats-file PATH", "--version", "-h, --help"]
# every shared flag's --help column; each says its default
WITH_DEFAULT = ["-b, --bind ADDR", "-p, --port PORT", "-T, --threads N",
                "-m, --model MODEL", "-i, --idle-timeout-ms MS", "-c, --max-conns N",
                "--max-conns-per-ip N", "--busy-poll-us US", "--accept-steer cpu|hash",
                "--backlog N", "-s, --stats-file PATH"]
NOT_TAKEN = {"ktcp-kcm-server": ["-m, --model MODEL", "--busy-poll-us US",
                                 "--accept-steer cpu|hash"],
             "ktcp-httpd": ["-s, --stats-file PATH"]}
# a bad number for each numeric shared flag, and the range it is refused with
BAD_NUMBERS = [("--port", "99999", "1..65535"), ("--port", "0", "1..65535"),
               ("--threads", "0", "1..256"), ("--idle-timeout-ms", "-1", "0..2147483647"),
               ("--max-conns", "many", "0..2147483647"),
               ("--max-conns-per-ip", "-1", "0..2147483647"), ("--backlog", "0", "1..65535"),
               ("--busy-poll-us", "10001", "0..10000"), ("--busy-poll-us", "-1", "0..10000")]


def exe_path(exe):
    return os.path.join(BUILD, exe)


def help_lines(exe):
    """--help's option lines, keyed by their flag column, each with its
    continuation lines."""
    out = run([exe_path(exe), "--help"], timeout=10).stdout
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
        texts = {exe: helps[exe].get(flag) for exe in SERVERS
                 if flag not in NOT_TAKEN.get(exe, [])}
        assert None not in texts.values(), (flag, texts)
        assert len(set(texts.values())) == 1, (flag, texts)
    for exe in ("ktcp-msg-server", "ktcp-httpd"):
        assert helps["ktcp-echo"]["-m, --model MODEL"] == helps[exe]["-m, --model MODEL"]
    # the KCM server has one model: no -m in its help, and -m is refused
    assert "-m, --model MODEL" not in helps["ktcp-kcm-server"]
    for exe in ("ktcp-msg-server", "ktcp-kcm-server"):
        assert "default 12346" in helps[exe]["-p, --port PORT"]
    assert "default 8081" in helps["ktcp-httpd"]["-p, --port PORT"]
    r = run([exe_path("ktcp-kcm-server"), "--model", "epoll"], check=False, timeout=10)
    assert r.returncode == 2 and "one model" in r.stderr, r.stderr


@pytest.mark.parametrize("exe", SERVERS)
def test_help_lists_every_shared_flag_with_its_default(exe):
    lines = help_lines(exe)
    for flag in WITH_DEFAULT:
        if flag in NOT_TAKEN.get(exe, []):
            assert flag not in lines, (exe, flag)
        else:
            assert "default" in lines.get(flag, ""), (exe, flag, lines.get(flag))
    assert "--version" in lines and "-h, --help" in lines


@pytest.mark.parametrize("exe", SERVERS)
@pytest.mark.parametrize("flag,value,bounds", BAD_NUMBERS)
def test_bad_number_names_the_flag(exe, flag, value, bounds):
    """One message, one exit status, whichever server: ktcp-httpd's said
    "expected an integer in 0..65535" and took --port 0 before it parsed
    with the runtime."""
    if exe == "ktcp-kcm-server" and flag == "--busy-poll-us":
        r = run([exe_path(exe), flag, value], check=False, timeout=10)
        assert r.returncode == 2 and "--busy-poll-us: not taken by ktcp-kcm-server" in r.stderr
        return
    r = run([exe_path(exe), flag, value], check=False, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr == f"{exe}: {flag} {value}: expected a number in {bounds}\n", r.stderr


@pytest.mark.parametrize("exe", SERVERS)
def test_accept_steer_takes_cpu_or_hash(exe):
    r = run([exe_path(exe), "--accept-steer", "round-robin"], check=False, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    if exe == "ktcp-kcm-server":
        assert "--accept-steer: not taken by ktcp-kcm-server" in r.stderr, r.stderr
    else:
        assert r.stderr == f"{exe}: --accept-steer round-robin: expected cpu or hash\n", r.stderr


@pytest.mark.parametrize("exe", SERVERS)
def test_version_unknown_flag_and_stray_argument(exe):
    r = run([exe_path(exe), "--version"], timeout=10)
    assert r.stdout.startswith(exe + " ") and not r.stderr, (r.stdout, r.stderr)
    r = run([exe_path(exe), "--no-such-flag"], check=False, timeout=10)
    assert r.returncode == 2 and "unrecognized option '--no-such-flag'" in r.stderr, r.stderr
    assert "Usage: " + exe in r.stderr  # with the help, on stderr
    r = run([exe_path(exe), "stray"], check=False, timeout=10)
    assert r.returncode == 2 and f"{exe}: unexpected argument 'stray'" in r.stderr, r.stderr


@pytest.mark.parametrize("exe", ["ktcp-echo", "ktcp-msg-server", "ktcp-httpd"])
def test_model_names(exe):
    """-m and --model take threads, epoll and mn (a bad port after it is
    what is named: the model was taken) and nothing else."""
    for model in ("threads", "epoll", "mn"):
        for spelling in ("-m", "--model"):
            r = run([exe_path(exe), spelling, model, "--port", "99999"], check=False, timeout=10)
            assert r.returncode == 2 and "--port 99999" in r.stderr, r.stderr
            assert "model" not in r.stderr, r.stderr
    r = run([exe_path(exe), "--model", "fibers"], check=False, timeout=10)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"{exe}: --model fibers: expected threads, epoll or mn\n", r.stderr


def test_httpd_refuses_stats_file():
    """ktcp-httpd has no counters file (SIGUSR1 reopens its access log; its
    counters are served at --status-path): -s is refused, not ignored."""
    for args in (["-s", "/tmp/x"], ["--stats-file", "/tmp/x"]):
        r = run([exe_path("ktcp-httpd"), *args], check=False, timeout=10)
        assert r.returncode == 2, r.stderr
        assert "stats-file: not taken by ktcp-httpd" in r.stderr, r.stderr
        assert "--status-path" in r.stderr, r.stderr


def test_httpd_config_file_takes_the_shared_flags(tmp_path):
    """A --config file is parsed by the same parser: a bad shared value in
    it fails the start naming the file, the line's flag and the range, and
    --help, --version, --config and -s are not settings there."""
    conf = tmp_path / "bad.conf"
    for line, why in (("port 99999", "--port 99999: expected a number in 1..65535"),
                      ("max-conns-per-ip -2", "--max-conns-per-ip -2: expected a number in 0..2147483647"),
                      ("model fibers", "--model fibers: expected threads, epoll or mn"),
                      ("help", "--help is not a setting"),
                      ("version", "--version is not a setting"),
                      ("config /etc/x.conf", "--config /etc/x.conf: not allowed in a --config file"),
                      ("stats-file /tmp/x", "-s/--stats-file: not taken by ktcp-httpd")):
        conf.write_text(f"gzip\n{line}\n")
        r = run([exe_path("ktcp-httpd"), "--root", str(tmp_path), "--config", str(conf)],
                check=False, timeout=10)
        assert r.returncode == 2, (line, r.stderr)
        assert f"ktcp-httpd: --config {conf}: {why}" in r.stderr, (line, r.stderr)
        assert not r.stdout and "Usage" not in r.stderr, (line, r.stdout, r.stderr)


def test_httpd_reload_of_a_bad_config_keeps_serving(tmp_path):
    """SIGHUP re-reads --config through the same parser, which never exits:
    a file with a bad shared value, or with --help or --version in it,
    changes nothing and the server goes on answering."""
    conf = tmp_path / "httpd.conf"
    (tmp_path / "a.txt").write_text("hello\n")
    conf.write_text("no-gzip\n")
    port = free_port()
    log = tmp_path / "stderr"
    with open(log, "w") as f:  # the server's; read through a file of our own
        p = subprocess.Popen([exe_path("ktcp-httpd"), "--root", str(tmp_path), "--port",
                              str(port), "--bind", "127.0.0.1", "--threads", "1", "--user",
                              "root", "--config", str(conf)],
                             stdout=subprocess.DEVNULL, stderr=f)

    def stderr():
        return log.read_text()

    def wait_for(text, count):
        deadline = time.monotonic() + 10
        while stderr().count(text) < count:
            assert p.poll() is None, stderr()
            assert time.monotonic() < deadline, stderr()
            time.sleep(0.05)

    try:
        wait_port(port, proc=p)
        for n, line in enumerate(("port 99999", "threads 0", "help", "version"), 1):
            conf.write_text(f"gzip\n{line}\n")
            p.send_signal(signal.SIGHUP)
            wait_for("SIGHUP: kept the running settings", n)
            with connect(port) as s:
                s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
            assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"hello\n"), reply
        assert f"--config {conf}: --port 99999: expected a number in 1..65535" in stderr()
        assert "--help is not a setting" in stderr() and "Usage" not in stderr()
        conf.write_text("gzip\n")
        p.send_signal(signal.SIGHUP)
        wait_for("SIGHUP: reloaded (gzip on", 1)
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0, stderr()


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
