"""ktcp-httpd (and ktcp-echo, on the same runtime) as a daemon an operator
runs: the signal loop under bursts, the stop (SIGTERM within
--shutdown-timeout, a second one at once, SIGQUIT without a deadline),
log rotation by the real logrotate while the server is loaded, one server
per port, systemd's readiness protocol, the unit's sandbox, and
--test-config. docs/operating.md describes each. User-space servers only;
every model where the model matters."""
import collections
import gzip
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from testlib import ROOT, free_port, require_kind
from engines import ECHO_BIN, HTTPD_BIN
from engines.base import parse_counters

MODELS = ["threads", "epoll", "mn"]
BIG = 32 << 20  # a file a client that stops reading cannot take whole


@pytest.fixture(autouse=True)
def _user_only():
    require_kind("user")


def need_root():
    if os.geteuid() != 0:
        pytest.skip("starts the server as root, which then serves as nobody")


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    root.chmod(0o755)
    (root / "a.txt").write_bytes(b"hello\n")
    with open(root / "big.bin", "wb") as f:
        f.truncate(BIG)
    os.chmod(root / "big.bin", 0o644)
    return root


def wait_for(cond, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Daemon:
    """A server process started with argv, its output in a file."""

    def __init__(self, tmp_path, argv, port, env=None, ready="ktcp-httpd: serving"):
        self.port = port
        self.out_path = tmp_path / f"{os.path.basename(argv[0])}-{port}.out"
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        if ready:
            wait_for(lambda: ready in self.text() or self.proc.poll() is not None,
                     f"{ready!r}", timeout=20)
            assert self.proc.poll() is None, self.text()

    def text(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running after {timeout} s:\n{self.text()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait(15)
        self.out.close()
        assert rc == 0, f"exit status {rc}:\n{self.text()[-3000:]}"


@pytest.fixture
def daemons():
    started = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def httpd(tmp_path, daemons, model, root, *flags, port=None, env=None, ready="ktcp-httpd: serving"):
    port = port or free_port()
    argv = [HTTPD_BIN, "--root", str(root), "--port", str(port), "--bind", "127.0.0.1",
            "--model", model, "--threads", "2", *flags]
    d = Daemon(tmp_path, argv, port, env=env, ready=ready)
    daemons.append(d)
    return d


def get(port, target="/a.txt"):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    return int(data.split(b" ", 2)[1]), data.split(b"\r\n\r\n", 1)[1]


def status_counters(port, path="/st"):
    code, body = get(port, path)
    assert code == 200
    return parse_counters(body.decode())


def stall(port, n):
    """n clients that ask for the big file, take its first bytes and stop
    reading: each response stays in flight until the idle timeout."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: h\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        socks.append(s)
    time.sleep(0.3)  # the server fills the windows and waits
    return socks


def in_flight(d):
    m = re.search(r"stopping: no new connections; (\d+) in flight", d.text())
    return int(m.group(1)) if m else None


# ---- signals: the runtime's one loop ----

@pytest.mark.parametrize("model", MODELS)
def test_signal_burst_leaves_httpd_serving(tmp_path, daemons, site, model):
    """200 SIGUSR1 and 20 SIGHUP sent as fast as kill(2) goes, while a
    client makes requests: whichever thread each lands on (liburcu's own
    threads unblock SIGUSR1), the server keeps serving and reopens its log."""
    log = tmp_path / "logs" / "access.log"
    log.parent.mkdir()
    d = httpd(tmp_path, daemons, model, site, "--access-log", str(log))
    stop = threading.Event()
    codes = []

    def load():
        while not stop.is_set() and len(codes) < 5000:
            codes.append(get(d.port)[0])
    t = threading.Thread(target=load)
    t.start()
    try:
        for i in range(200):
            os.kill(d.proc.pid, signal.SIGUSR1)
            if i % 10 == 0:
                os.kill(d.proc.pid, signal.SIGHUP)
        time.sleep(0.5)
    finally:
        stop.set()
        t.join()
    assert d.proc.poll() is None, f"died: {d.proc.returncode}\n{d.text()[-2000:]}"
    assert codes and set(codes) == {200}
    wait_for(lambda: "SIGUSR1: access log reopened" in d.text(), "a reopen")
    wait_for(lambda: "SIGHUP: reloaded" in d.text(), "a reload")
    assert get(d.port)[0] == 200
    d.stop()


@pytest.mark.parametrize("model", MODELS)
def test_signal_burst_leaves_echo_serving(tmp_path, daemons, model):
    port = free_port()
    stats = tmp_path / "echo.stats"
    d = Daemon(tmp_path, [ECHO_BIN, "--port", str(port), "--bind", "127.0.0.1", "--model", model,
                          "--threads", "2", "--stats-file", str(stats)], port,
               ready="ktcp-echo: listening")
    daemons.append(d)
    for i in range(200):
        os.kill(d.proc.pid, signal.SIGUSR1)
        if i % 10 == 0:
            os.kill(d.proc.pid, signal.SIGHUP)
    time.sleep(0.5)
    assert d.proc.poll() is None, f"died: {d.proc.returncode}\n{d.text()[-2000:]}"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"still here\n")
        assert s.recv(100) == b"still here\n"
    # SIGUSR1 still writes the counters file
    wait_for(lambda: stats.exists() and "accepted" in stats.read_text(), "the counters file")
    d.stop()


@pytest.mark.parametrize("model", MODELS)
def test_sigterm_cuts_stalled_downloads_at_the_shutdown_timeout(tmp_path, daemons, site, model):
    d = httpd(tmp_path, daemons, model, site, "--shutdown-timeout", "2")
    socks = stall(d.port, 4)
    try:
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        # no new connection is taken once the stop began
        wait_for(lambda: in_flight(d) is not None, "the stop's message", timeout=2)

        def refused():
            try:
                socket.create_connection(("127.0.0.1", d.port), timeout=1).close()
                return False
            except OSError:
                return True
        wait_for(refused, "the listener closed", timeout=1.5)
        rc = d.wait(5)
        took = time.monotonic() - t0
    finally:
        for s in socks:
            s.close()
    assert rc == 0, d.text()
    assert in_flight(d) == 4, d.text()
    assert 1.8 <= took <= 3.0, f"exited {took:.2f} s after SIGTERM with --shutdown-timeout 2"
    assert "--shutdown-timeout passed: cutting 4 connections" in d.text(), d.text()
    assert "left to the exit" not in d.text(), d.text()  # each cut ended its response


@pytest.mark.parametrize("model,second", [("threads", signal.SIGTERM), ("epoll", signal.SIGINT),
                                          ("mn", signal.SIGTERM)])
def test_second_sigterm_stops_at_once(tmp_path, daemons, site, model, second):
    """SIGTERM, then a second SIGTERM or a SIGINT: in-flight responses are
    cut at once (each signal on some model)."""
    d = httpd(tmp_path, daemons, model, site, "--shutdown-timeout", "0")
    socks = stall(d.port, 2)
    try:
        d.signal(signal.SIGTERM)
        wait_for(lambda: in_flight(d) is not None, "the stop's message", timeout=2)
        assert "without a deadline" in d.text()
        time.sleep(1.0)
        assert d.proc.poll() is None, "--shutdown-timeout 0 has no deadline"
        t0 = time.monotonic()
        d.signal(second)
        rc = d.wait(5)
        took = time.monotonic() - t0
    finally:
        for s in socks:
            s.close()
    assert rc == 0, d.text()
    assert took <= 1.0, f"exited {took:.2f} s after the second signal"
    assert f"second {second.name}: cutting 2 connections" in d.text(), d.text()
    assert "left to the exit" not in d.text(), d.text()


@pytest.mark.parametrize("model", MODELS)
def test_sigquit_stops_gracefully_without_a_deadline(tmp_path, daemons, site, model):
    """SIGQUIT (nginx's graceful stop): no new connections, and a download
    in flight finishes whole however long it takes — past
    --shutdown-timeout, which is SIGTERM's."""
    d = httpd(tmp_path, daemons, model, site, "--shutdown-timeout", "1")
    (s,) = stall(d.port, 1)
    try:
        d.signal(signal.SIGQUIT)
        wait_for(lambda: in_flight(d) is not None, "the stop's message", timeout=2)
        time.sleep(2.0)
        assert d.proc.poll() is None, d.text()
        data = b""
        s.settimeout(20)
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            data += b
    finally:
        s.close()
    # the first recv in stall() took the head and at most 4 KiB of body
    assert len(data) >= BIG - 4096, len(data)
    assert d.wait(10) == 0, d.text()
    assert "SIGQUIT: stopping" in d.text() and "cutting" not in d.text(), d.text()


@pytest.mark.parametrize("model", MODELS)
def test_sigusr2_is_ignored(tmp_path, daemons, site, model):
    d = httpd(tmp_path, daemons, model, site)
    d.signal(signal.SIGUSR2)
    wait_for(lambda: "SIGUSR2: ignored" in d.text(), "SIGUSR2's line")
    assert get(d.port)[0] == 200
    d.stop()


# ---- the access log: reopen failures, logrotate ----

@pytest.mark.parametrize("model", MODELS)
def test_failed_reopen_is_counted_and_logged_once_per_signal(tmp_path, daemons, site, model):
    logs = tmp_path / "logs"
    logs.mkdir()
    d = httpd(tmp_path, daemons, model, site, "--access-log", str(logs / "access.log"),
              "--status-path", "/st")
    assert status_counters(d.port)["log_reopen_failures"] == 0
    os.rename(logs, tmp_path / "logs.old")  # the directory is gone: no reopen can work
    for n in (1, 2):
        d.signal(signal.SIGUSR1)
        wait_for(lambda: d.text().count("SIGUSR1: --access-log") == n, f"failure {n}")
        assert status_counters(d.port)["log_reopen_failures"] == n
    assert d.text().count("still logging to the file open before") == 2
    code, body = get(d.port, "/st/metrics")
    assert "ktcp_httpd_log_reopen_failures_total 2\n" in body.decode()
    d.stop()


def test_root_opens_the_log_of_start_and_of_each_reload(tmp_path, daemons, site):
    """Started as root, serving as nobody, the log in a directory only root
    may write: the process that kept root opens the --access-log of the
    start (SIGUSR1 after a rename reopens it, created by root) and, after
    a SIGHUP whose --config names another file, that one, which it reads
    from the --config file itself; requests are logged there."""
    need_root()
    logdir = tmp_path / "log"
    logdir.mkdir(mode=0o755)
    first, other = logdir / "access.log", logdir / "other.log"
    # the --config file is read again at SIGHUP as nobody: where nobody may
    confdir = tempfile.mkdtemp(prefix="ktcp-test-conf-")
    os.chmod(confdir, 0o755)
    conf = pathlib.Path(confdir) / "k.conf"
    conf.write_text(f"access-log {first}\nstatus-path /st\n")
    conf.chmod(0o644)
    try:
        d = httpd(tmp_path, daemons, "epoll", site, "--config", str(conf), "--user", "nobody")
        root_kept_checks(d, conf, first, other, logdir)
    finally:
        shutil.rmtree(confdir)


def root_kept_checks(d, conf, first, other, logdir):
    assert get(d.port)[0] == 200
    os.rename(first, logdir / "access.log.1")
    d.signal(signal.SIGUSR1)
    wait_for(lambda: "SIGUSR1: access log reopened" in d.text(), "the reopen as root")
    assert first.exists() and first.stat().st_uid == 0
    conf.write_text(f"access-log {other}\nstatus-path /st\n")
    d.signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: reloaded" in d.text(), "the reload")
    assert f"SIGHUP: access log reopened at {other}" in d.text(), d.text()
    assert other.exists() and other.stat().st_uid == 0
    assert get(d.port, "/a.txt?after-reload")[0] == 200
    # back to the first file, then the second once more: each reload
    conf.write_text(f"access-log {first}\nstatus-path /st\n")
    d.signal(signal.SIGHUP)
    wait_for(lambda: d.text().count("SIGHUP: reloaded") == 2, "the second reload")
    assert f"SIGHUP: access log reopened at {first}" in d.text(), d.text()
    assert status_counters(d.port)["log_reopen_failures"] == 0
    assert "still logging" not in d.text()
    d.stop()  # every worker writes out what it holds
    assert "GET /a.txt?after-reload " in other.read_text()
    assert "GET /a.txt?after-reload " not in first.read_text()


LOGROTATE = os.path.join(ROOT, "dist/logrotate/ktcp-httpd")


def rotated_lines(logdir):
    """Every line of every file of the log: access.log, access.log.N and
    access.log.N.gz."""
    lines = []
    for name in sorted(os.listdir(logdir)):
        if not name.startswith("access.log"):
            continue
        path = os.path.join(logdir, name)
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rb") as f:
            lines.append((name, f.read().decode().splitlines()))
    return lines


@pytest.mark.parametrize("model", MODELS)
def test_logrotate_under_load_loses_no_line(tmp_path, daemons, site, model):
    """Started as root, serving as nobody, the server's log lives in a
    directory only root may write (/var/log's way): the shipped logrotate
    file, run by the real logrotate -f five times while a client keeps
    requesting, leaves every answered request in exactly one of the files."""
    need_root()
    if not shutil.which("logrotate"):
        pytest.skip("logrotate is not installed (scripts/deps installs it)")
    logdir = tmp_path / "log"
    logdir.mkdir(mode=0o755)
    log = logdir / "access.log"
    d = httpd(tmp_path, daemons, model, site, "--access-log", str(log), "--user", "nobody",
              "--status-path", "/st")
    assert " as nobody " in d.text()

    shipped = open(LOGROTATE).read()
    assert "/var/log/ktcp-httpd/*.log {" in shipped
    signal_line = "systemctl kill --kill-who=main --signal=USR1 ktcp-httpd.service"
    assert signal_line in shipped
    conf = tmp_path / "logrotate.conf"
    conf.write_text(shipped.replace("/var/log/ktcp-httpd/*.log", str(logdir / "*.log"))
                    .replace(signal_line, f"kill -USR1 {d.proc.pid}"))
    conf.chmod(0o644)

    stop = threading.Event()
    answered = []
    errors = []

    def load():
        n = 0
        try:
            while not stop.is_set() and n < 200000:
                time.sleep(0.01)  # at most 5000 requests a second
                with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                    f = s.makefile("rb")
                    for _ in range(50):
                        s.sendall(f"GET /a.txt?n={n} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
                        status = f.readline()
                        while f.readline() not in (b"\r\n", b""):
                            pass
                        assert f.read(6) == b"hello\n"
                        assert status.startswith(b"HTTP/1.1 200"), status
                        answered.append(n)
                        n += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=load)
    t.start()
    try:
        for i in range(1, 6):
            time.sleep(0.4)
            # lines wait up to a second in a worker's buffer; notifempty
            # would skip an empty file
            wait_for(lambda: log.exists() and log.stat().st_size > 0, "lines in the log")
            before = len(answered)
            r = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "logrotate.state"),
                                str(conf)], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            wait_for(lambda: d.text().count("SIGUSR1: access log reopened") == i,
                     f"reopen {i}")
            wait_for(lambda: len(answered) > before + 20 or errors,
                     f"requests after rotation {i} ({len(answered)} answered): {d.text()}")
            assert not errors, errors
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    assert status_counters(d.port)["log_reopen_failures"] == 0
    d.stop()  # every worker writes out what it holds

    files = rotated_lines(logdir)
    seen = collections.Counter()
    for name, lines in files:
        for line in lines:
            m = re.search(r'"GET /a\.txt\?n=(\d+) HTTP/1\.1" 200 ', line)
            if m:
                seen[int(m.group(1))] += 1
    assert sum(1 for _, lines in files if lines) >= 4, [(n, len(l)) for n, l in files]
    twice = [n for n, c in seen.items() if c > 1]
    missing = sorted(set(answered) - set(seen))
    assert not twice and not missing, (f"{len(answered)} answered, {len(missing)} missing "
                                       f"{missing[:10]}, {len(twice)} twice")
    assert set(seen) == set(answered)
    assert "still logging" not in d.text()


# ---- one server per port ----

@pytest.mark.parametrize("model", MODELS)
def test_second_httpd_on_a_used_port_exits_1(tmp_path, daemons, site, model):
    first = httpd(tmp_path, daemons, model, site)
    r = subprocess.run([HTTPD_BIN, "--root", str(site), "--port", str(first.port),
                        "--bind", "127.0.0.1", "--model", model, "--threads", "2"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1, r.stderr
    assert "Address already in use: another process listens there" in r.stderr, r.stderr
    # the first one's workers still share the port, and it serves them all
    for _ in range(20):
        assert get(first.port)[0] == 200
    first.stop()


@pytest.mark.parametrize("model", MODELS)
def test_second_echo_on_a_used_port_exits_1(tmp_path, daemons, model):
    port = free_port()
    argv = [ECHO_BIN, "--port", str(port), "--bind", "127.0.0.1", "--model", model,
            "--threads", "2"]
    first = Daemon(tmp_path, argv, port, ready="ktcp-echo: listening")
    daemons.append(first)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert r.returncode == 1, r.stderr
    assert "another process listens there" in r.stderr, r.stderr
    first.stop()


# ---- systemd ----

def notify_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(10)
    return s


@pytest.mark.parametrize("model", MODELS)
def test_notify_ready_reloading_stopping(tmp_path, daemons, site, model):
    """The sd_notify(3) datagrams, to a NOTIFY_SOCKET of the test's own:
    READY=1 once listening, RELOADING=1 with MONOTONIC_USEC then READY=1
    around a SIGHUP, STOPPING=1 at SIGTERM."""
    path = tmp_path / "notify"
    ns = notify_socket(path)
    env = dict(os.environ, NOTIFY_SOCKET=str(path))
    d = httpd(tmp_path, daemons, model, site, env=env)
    try:
        assert ns.recv(4096) == b"READY=1"
        assert get(d.port)[0] == 200  # ready means serving
        before = time.monotonic_ns() // 1000
        d.signal(signal.SIGHUP)
        msg = ns.recv(4096).decode()
        m = re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=(\d+)", msg)
        assert m, msg
        assert before <= int(m.group(1)) <= time.monotonic_ns() // 1000
        assert ns.recv(4096) == b"READY=1"
        assert "SIGHUP: reloaded" in d.text()
        d.signal(signal.SIGTERM)
        assert ns.recv(4096) == b"STOPPING=1"
        d.stop()
    finally:
        ns.close()


def test_notify_abstract_socket_echo(tmp_path, daemons):
    name = f"ktcp-test-notify-{os.getpid()}-{free_port()}"
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind("\0" + name)
    ns.settimeout(10)
    port = free_port()
    try:
        d = Daemon(tmp_path, [ECHO_BIN, "--port", str(port), "--bind", "127.0.0.1"], port,
                   env=dict(os.environ, NOTIFY_SOCKET="@" + name), ready="ktcp-echo: listening")
        daemons.append(d)
        assert ns.recv(4096) == b"READY=1"
        d.signal(signal.SIGTERM)
        assert ns.recv(4096) == b"STOPPING=1"
        d.stop()
    finally:
        ns.close()


UNIT = os.path.join(ROOT, "dist/systemd/ktcp-httpd.service")


def test_unit_is_notify_and_restart_safe():
    text = open(UNIT).read()
    for line in ("Type=notify", "NotifyAccess=main",
                 "ExecStart=@BINDIR@/ktcp-httpd --config @SYSCONFDIR@/ktcp-httpd.conf",
                 "ExecReload=/bin/kill -HUP $MAINPID", "RestartPreventExitStatus=2",
                 "LogsDirectory=ktcp-httpd"):
        assert line + "\n" in text, line
    # the shipped settings are what --test-config reads without complaint
    # but for the root and the log, which are the target machine's
    conf = open(os.path.join(ROOT, "dist/ktcp-httpd.conf")).read()
    assert "access-log /var/log/ktcp-httpd/access.log\n" in conf
    r = subprocess.run([HTTPD_BIN, "--config", os.path.join(ROOT, "dist/ktcp-httpd.conf"),
                        "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0


def test_unit_security_exposure_at_most_2(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "ktcp-httpd.service"
    unit.write_text(open(UNIT).read().replace("@BINDIR@", "/usr/bin")
                    .replace("@SYSCONFDIR@", "/etc"))
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=20",
                        str(unit)], capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for ktcp-httpd\.service: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.0, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr


class Container:
    """systemd 252 booted as PID 1 by systemd-nspawn (no machined, no host
    systemd needed: --register=no --keep-unit) on a volatile copy of this
    machine's /usr, with the shipped unit, its settings file, the build
    directory and a site bound in; the host's network, so its port is
    127.0.0.1's. Commands run inside through nsenter."""

    def __init__(self, tmp_path, binds):
        self.out = open(tmp_path / "nspawn.out", "wb")
        argv = ["systemd-nspawn", "--quiet", "--volatile=yes", "--directory=/",
                "--register=no", "--keep-unit", "--console=pipe",
                f"--machine=ktcp-test-{os.getpid()}"]
        argv += [f"--bind-ro={src}:{dst}" for src, dst in binds]
        # the boot, its own services only: nothing of the host's is started
        argv += ["--boot", "--", "systemd.mask=nginx.service", "systemd.mask=keepalived.service",
                 "systemd.mask=postgresql.service", "systemd.mask=systemd-firstboot.service"]
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.leader = wait_for(self._leader, "the container's systemd", timeout=60)
        wait_for(lambda: self.sh("systemctl", "is-system-running", check=False).stdout.strip()
                 in ("running", "degraded"), "the container's boot", timeout=90)

    def _leader(self):
        assert self.proc.poll() is None, open(self.out.name).read()
        r = subprocess.run(["pgrep", "-P", str(self.proc.pid), "-x", "systemd"],
                           capture_output=True, text=True)
        return int(r.stdout.split()[0]) if r.returncode == 0 and r.stdout.strip() else None

    def sh(self, *argv, check=True, timeout=60):
        r = subprocess.run(["nsenter", "-t", str(self.leader), "-a", *argv],
                           capture_output=True, text=True, timeout=timeout)
        assert not check or r.returncode == 0, f"{argv}: {r.returncode}\n{r.stdout}{r.stderr}"
        return r

    def show(self, unit, prop):
        return self.sh("systemctl", "show", "-P", prop, unit).stdout.strip()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # nspawn: the container's poweroff
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.out.close()


def test_unit_under_systemd_notify_reload_stop(tmp_path, site):
    """The shipped unit under a real systemd (PID 1 of a systemd-nspawn
    container): systemctl start returns once the server said READY=1 and
    it serves, as the system user of dist/sysusers.d (DynamicUser= made
    openat2 fail with ENOSYS: the server refused to start); systemctl reload re-reads the settings file (the access log
    moves to a new file) with the same main process; systemctl stop ends it
    with status 0 and the unit inactive, not failed."""
    need_root()
    if not shutil.which("systemd-nspawn") or not os.path.exists("/lib/systemd/systemd"):
        pytest.skip("systemd-nspawn is not installed (scripts/deps installs systemd-container)")
    port = free_port()
    unit = tmp_path / "ktcp-httpd.service"
    unit.write_text(open(UNIT).read().replace("@BINDIR@", "/opt/ktcp")
                    .replace("@SYSCONFDIR@", "/etc").replace("@SYSUSERSDIR@", "/etc/sysusers.d"))
    conf = tmp_path / "ktcp-httpd.conf"
    shipped = open(os.path.join(ROOT, "dist/ktcp-httpd.conf")).read()
    assert "port 80\n" in shipped and "root /var/www/html\n" in shipped
    conf.write_text(shipped.replace("port 80\n", f"port {port}\nbind 127.0.0.1\n")
                    .replace("root /var/www/html\n", "root /srv/www\n"))
    for p in (tmp_path, conf, unit):
        p.chmod(0o755 if p.is_dir() else 0o644)
    # a volatile /etc: the first boot enables the unit by its preset and
    # starts it; it is stopped, then started by hand
    c = Container(tmp_path, [(os.path.dirname(HTTPD_BIN), "/opt/ktcp"), (str(site), "/srv/www"),
                             (str(unit), "/etc/systemd/system/ktcp-httpd.service"),
                             (os.path.join(ROOT, "dist/sysusers.d/ktcp-httpd.conf"),
                              "/etc/sysusers.d/ktcp-httpd.conf"),
                             (str(conf), "/etc/ktcp-httpd.conf")])
    try:
        c.sh("systemctl", "stop", "ktcp-httpd.service")
        assert c.show("ktcp-httpd", "ActiveState") == "inactive"
        r = c.sh("systemctl", "start", "ktcp-httpd.service", check=False)  # returns at READY=1
        assert r.returncode == 0, c.sh("journalctl", "-u", "ktcp-httpd", "--no-pager",
                                       check=False).stdout
        assert c.show("ktcp-httpd", "ActiveState") == "active"
        assert c.show("ktcp-httpd", "Type") == "notify"
        assert get(port) == (200, b"hello\n")
        main = c.show("ktcp-httpd", "MainPID")
        # as the unit's own system user, never root
        status = c.sh("cat", f"/proc/{main}/status").stdout
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
        assert uid != "0" and c.sh("id", "-u", "ktcp-httpd").stdout.strip() == uid
        assert c.sh("ls", "/var/log/ktcp-httpd/").stdout.split() == ["access.log"]

        conf.write_text(conf.read_text().replace("access.log", "reloaded.log"))
        c.sh("systemctl", "reload", "ktcp-httpd.service")  # returns at READY=1 after RELOADING=1
        assert c.show("ktcp-httpd", "MainPID") == main
        assert c.show("ktcp-httpd", "ActiveState") == "active"
        assert get(port) == (200, b"hello\n")
        wait_for(lambda: "reloaded.log" in c.sh("ls", "/var/log/ktcp-httpd/").stdout,
                 "the log of the reloaded settings")
        journal = c.sh("journalctl", "-u", "ktcp-httpd", "--no-pager", "-o", "cat").stdout
        assert "SIGHUP: reloaded" in journal, journal

        t0 = time.monotonic()
        c.sh("systemctl", "stop", "ktcp-httpd.service")
        assert time.monotonic() - t0 < 15
        assert c.show("ktcp-httpd", "ActiveState") == "inactive"
        assert c.show("ktcp-httpd", "ExecMainStatus") == "0"
        assert c.show("ktcp-httpd", "Result") == "success"
    finally:
        c.close()


def test_shipped_config_is_taken(tmp_path, site):
    """dist/ktcp-httpd.conf parses; with its root and log pointed here it
    passes --test-config."""
    conf = tmp_path / "k.conf"
    text = open(os.path.join(ROOT, "dist/ktcp-httpd.conf")).read()
    conf.write_text(text.replace("/var/www/html", str(site))
                    .replace("/var/log/ktcp-httpd/access.log", str(tmp_path / "access.log")))
    r = subprocess.run([HTTPD_BIN, "--config", str(conf), "--test-config"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert "the settings are usable" in r.stderr


# ---- --test-config, and the same checks at every start ----

def check_config(*args):
    return subprocess.run([HTTPD_BIN, *args, "--test-config"], capture_output=True,
                          text=True, timeout=20)


def test_test_config_accepts_a_usable_setup(tmp_path, site):
    r = check_config("--root", str(site), "--access-log", str(tmp_path / "a.log"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == ["ktcp-httpd: --test-config: the settings are usable"]


def test_test_config_names_each_problem(tmp_path):
    r = check_config("--root", str(tmp_path / "none"), "--access-log", "/nonexistent-dir/a.log")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"ktcp-httpd: --root {tmp_path / 'none'}: No such file or directory",
        "ktcp-httpd: --access-log /nonexistent-dir/a.log: No such file or directory"]


def test_short_t_is_test_config(tmp_path, site):
    """-t is --test-config, as nginx -t: the same status and the same lines,
    for a usable setup and for one with problems."""
    for args in (["--root", str(site), "--access-log", str(tmp_path / "a.log")],
                 ["--root", str(tmp_path / "none"), "--access-log", "/nonexistent-dir/a.log"]):
        long = check_config(*args)
        short = subprocess.run([HTTPD_BIN, "-t", *args], capture_output=True, text=True,
                               timeout=20)
        assert (short.returncode, short.stderr) == (long.returncode, long.stderr)
        assert short.returncode == (0 if "none" not in args[1] else 1), short.stderr
        assert short.stderr.strip(), "no line said why"


@pytest.mark.parametrize("binary", [HTTPD_BIN, ECHO_BIN])
def test_threads_short_flag_is_T(binary, site):
    """Worker threads are -T in every server on the runtime; the old -t N
    is refused with a line saying so, never taken as something else."""
    help_text = subprocess.run([binary, "--help"], capture_output=True, text=True,
                               timeout=10).stdout
    assert "  -T, --threads N" in help_text
    r = subprocess.run([binary, "--root", str(site), "-t", "2"] if binary == HTTPD_BIN
                       else [binary, "-t", "2"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r.stderr
    assert "worker threads are -T N (--threads N); -t is not --threads" in r.stderr, r.stderr


def test_test_config_bad_flag_is_status_2(site):
    r = check_config("--root", str(site), "--threads", "zero")
    assert r.returncode == 2 and "--threads zero" in r.stderr


def test_root_the_serving_user_cannot_enter(tmp_path, site, daemons):
    """Root's private directory, served as nobody: every request would be
    a 403; --test-config says why, and the server refuses to start."""
    need_root()
    site.chmod(0o700)
    r = check_config("--root", str(site), "--user", "nobody")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"ktcp-httpd: --root {site}: user nobody may not enter it: Permission denied",
        f"ktcp-httpd: --root {site}: user nobody may not list it: Permission denied"]
    site.chmod(0o711)
    r = check_config("--root", str(site), "--user", "nobody")
    assert r.returncode == 1 and r.stderr.splitlines() == [
        f"ktcp-httpd: --root {site}: user nobody may not list it: Permission denied"]
    port = free_port()
    r = subprocess.run([HTTPD_BIN, "--root", str(site), "--user", "nobody", "--port", str(port),
                        "--bind", "127.0.0.1"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and "may not list it" in r.stderr, r.stderr
    site.chmod(0o755)
    assert check_config("--root", str(site), "--user", "nobody").returncode == 0


def test_no_openat2_is_refused(tmp_path, site):
    """A kernel without openat2 (here: strace makes it fail with ENOSYS, as
    a kernel before 5.6 does) would answer every request with an error."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed (scripts/deps installs it)")
    inject = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=openat2",
              "-e", "inject=openat2:error=ENOSYS"]
    r = subprocess.run(inject + [HTTPD_BIN, "--root", str(site), "--test-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert "ktcp-httpd: openat2: Function not implemented" in r.stderr, r.stderr
    r = subprocess.run(inject + [HTTPD_BIN, "--root", str(site), "--port", str(free_port()),
                                 "--bind", "127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "openat2" in r.stderr, r.stderr


# ---- what the docs promise the operator ----

def test_docs_signal_table_rotation_recipe_and_platforms():
    """docs/operating.md has a row for every signal the runtime's loop
    catches (and SIGPIPE, which it ignores) and shows the shipped logrotate
    file as it is; README's Platforms names each architecture the context
    switch is written for and the fallback for the others."""
    ops = open(os.path.join(ROOT, "docs/operating.md")).read()
    table = ops.split("\n## Signals\n", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| SIG")
            or line.startswith("| a second")]
    cli = open(os.path.join(ROOT, "user/rt/rt-cli.c")).read()
    caught = re.search(r"caught\[\] = \{([^}]*)\}", cli).group(1)
    sigs = re.findall(r"SIG[A-Z0-9]+", caught) + ["SIGPIPE"]
    assert len(sigs) >= 7, caught
    for sig in sigs:
        assert any(re.search(rf"\b{sig}\b", r.split("|")[1]) for r in rows), (sig, rows)
    assert any(r.startswith("| a second SIGTERM or SIGINT |") for r in rows)

    recipe = ops.split("\n### Rotation\n", 1)[1].split("```\n", 2)[1]
    shipped = "".join(line for line in open(LOGROTATE).read().splitlines(True)
                      if not line.startswith("#"))
    assert recipe == shipped

    readme = open(os.path.join(ROOT, "README.md")).read()
    platforms = readme.split("\n## Platforms\n", 1)[1].split("\n## ", 1)[0]
    switch = open(os.path.join(ROOT, "user/rt/rt-switch.c")).read()
    archs = {"__x86_64__": "x86-64", "__aarch64__": "aarch64"}
    for macro in re.findall(r"#elif defined\((__\w+__)\)", switch):
        assert archs[macro] in platforms, macro
    assert "Debian 12 (bookworm) on amd64" in platforms
    assert "make BUILD=build/ucontext RT_CORO=ucontext user" in platforms
