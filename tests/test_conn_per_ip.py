"""max_conns_per_ip on every engine: kecho.ko and khttpd.ko in the VM
(their module parameter, kernel/common/ktcp_server.c), ktcp-echo and
ktcp-httpd in each model on the host (--max-conns-per-ip, the user runtime's
admission in user/rt/rt-admit.c). A client address past its limit is refused
as past max_conns (khttpd and ktcp-httpd: a 503; the echo servers: closed);
other addresses keep their own count; IPv4 and IPv4-mapped IPv6 are one
address; a slot frees when its connection ends. By default (no
max_conns_per_ip given) an address gets a quarter of max_conns, at least
64, and IPv6 clients of one /64 (per_ip_v6_prefix) are one address.
"""
import contextlib
import ctypes
import os
import signal
import subprocess
import time

import pytest

from testlib import BUILD, free_port, require_kind, stats_file_counters, wait_port
from test_kernel_modules import Served

USER = [f"{prog}-{model}" for prog in ("ktcp-echo", "ktcp-httpd")
        for model in ("threads", "epoll", "mn")]


class Refused(Exception):
    """The status page's connection was refused (503)."""


class UserServed(Served):
    """ktcp-echo or ktcp-httpd started with the given options, listening
    on ::ffff:127.0.0.1 (an IPv6 socket taking IPv4 clients: what the
    default bind, every address, sees of an IPv4 client) or on bind.
    connect() and served() are test_kernel_modules.Served's; the start is
    its own (Served's loads a module)."""

    def __init__(self, engine, tmp_path, bind="::ffff:127.0.0.1",
                 host="127.0.0.1", args=(), **params):
        prog, model = engine.rsplit("-", 1)
        self.name = prog
        self.port = free_port()
        self.stats = str(tmp_path / "stats")
        cmd = [os.path.join(BUILD, prog), "--port", str(self.port), "--bind", bind,
               "--model", model, "--threads", "2"]
        for k, v in params.items():  # max_conns=200 -> --max-conns 200
            cmd += ["--" + k.replace("_", "-"), str(v)]
        cmd += list(args)  # repeatable flags, in order
        if prog == "ktcp-echo":
            cmd += ["--stats-file", self.stats]
        else:
            (tmp_path / "a.txt").write_bytes(b"hello\n")
            tmp_path.chmod(0o755)
            cmd += ["--root", str(tmp_path), "--status-path", "/-/status"]
            if os.geteuid() == 0:
                cmd += ["--user", "nobody"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        wait_port(self.port, host=host, proc=self.proc)

    def probe_ended(self, timeout=10):
        """Wait until wait_port's connection has been admitted and has
        ended: until then it holds a slot of its address (the threads
        model's thread sees its close only when it next runs), and a test
        that fills a share exactly would see one refusal too many. The
        status page's own connection (ktcp-httpd) is one of the active.
        Only where a test fills a share exactly: the status page's fetches
        would count against a rate limit or meet a PROXY listener."""
        own = 0 if self.name == "ktcp-echo" else 1
        deadline = time.monotonic() + timeout
        while True:
            try:
                c = self.counters()
            except Refused as ex:  # ::1 past its limit of 1: the probe holds it
                c = ex
            else:
                if c["accepted"] >= 1 + own and c["active"] == own:
                    return
            assert time.monotonic() < deadline, f"the readiness probe still held: {c}"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not exit after SIGTERM")
        assert rc == 0, f"{self.name} exited {rc}: {self.proc.stderr.read()}"

    def counters(self, source="127.0.0.9"):
        if self.name == "ktcp-echo":
            return stats_file_counters(self.proc, self.stats)
        else:
            # from ::1 (not listened on) or a fresh IPv4 source of its own
            with self.connect("127.0.0.1", source=source) as s:
                s.sendall(b"GET /-/status HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
                got = b""
                while (b := s.recv(65536)):
                    got += b
            if got.startswith(b"HTTP/1.1 503 "):
                raise Refused(f"{self.host} refused the status page")
            assert got.startswith(b"HTTP/1.1 200 "), got[:60]
            text = got.split(b"\r\n\r\n", 1)[1].decode()
        return {k: int(v) for k, v in (line.split()[:2] for line in text.splitlines())}


@pytest.fixture(params=USER + ["kecho", "khttpd"])
def engine(request, tmp_path):
    """start(ipv6=False, **params): the engine serving IPv4 clients (and, in
    the VM, every address), or only ::1 (ipv6=True) or the IPv6 address
    given."""
    started = []
    user = request.param in USER
    require_kind("user" if user else "kernel")

    def start(ipv6=False, **params):
        v6 = ipv6 if isinstance(ipv6, str) else "::1"
        if user:
            bind = v6 if ipv6 else "::ffff:127.0.0.1"
            m = UserServed(request.param, tmp_path, bind=bind,
                           host=v6 if ipv6 else "127.0.0.1", **params)
        else:
            if ipv6:
                params.update(bind=v6, host=v6)
            m = Served(request.param, tmp_path, **params)
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()


def admitted(m, host="127.0.0.1", timeout=10):
    """A connection m serves: the readiness probe's may still hold a slot."""
    deadline = time.monotonic() + timeout
    while True:
        s = m.connect(host)
        if m.served(s):
            return s
        s.close()
        assert time.monotonic() < deadline, f"no connection from {host} admitted"
        time.sleep(0.1)


def test_max_conns_per_ip(engine):
    m = engine(max_conns_per_ip=2)
    kept = [admitted(m), admitted(m)]
    try:
        with m.connect("127.0.0.1") as extra:
            assert not m.served(extra), "a third connection from 127.0.0.1 was served"
        # IPv4-mapped IPv6 is the same client
        with m.connect("::ffff:127.0.0.1") as extra:
            assert not m.served(extra), "::ffff:127.0.0.1 was not counted as 127.0.0.1"
        # Other addresses have their own count.
        with m.connect("127.0.0.1", source="127.0.0.2") as a:
            assert m.served(a)
        for s in kept:  # the first two are still served
            assert m.served(s)
        assert m.counters()["refused"] >= 2
        kept.pop().close()  # a slot frees when its connection ends
        admitted(m).close()
    finally:
        for s in kept:
            s.close()


def test_max_conns_per_ip_ipv6(engine):
    m = engine(ipv6=True, max_conns_per_ip=1)
    kept = admitted(m, host="::1")
    try:
        with m.connect("::1") as extra:
            assert not m.served(extra), "a second connection from ::1 was served"
        assert m.served(kept)
        kept.close()
        kept = admitted(m, host="::1")  # its slot is free again
    finally:
        kept.close()


def test_max_conns_per_ip_zero_is_no_limit(engine):
    m = engine(max_conns_per_ip=0)
    kept = [admitted(m) for _ in range(20)]
    try:
        for s in kept:
            assert m.served(s)
    finally:
        for s in kept:
            s.close()


def test_default_share_leaves_room_for_others(engine):
    """No max_conns_per_ip given: with max_conns=200 one address gets a
    quarter, at least 64 (here 64); its next connection is refused, and
    another address is still served."""
    m = engine(max_conns=200)
    if hasattr(m, "probe_ended"):
        m.probe_ended()
    share = max(200 // 4, 64)
    kept = [admitted(m)]
    try:
        kept += [m.connect("127.0.0.1") for _ in range(share - 1)]
        for s in kept[1:]:
            assert m.served(s)
        with m.connect("127.0.0.1") as extra:
            assert not m.served(extra), f"127.0.0.1 was served past its share of {share}"
        with m.connect("127.0.0.1", source="127.0.0.2") as other:
            assert m.served(other), "127.0.0.2 was refused while 127.0.0.1 held its share"
    finally:
        for s in kept:
            s.close()


NET = "fd00:6b74:6370:1"  # one /64 of the test's own, and a second beside it
V6_SAME = [f"{NET}::1", f"{NET}::2", f"{NET}::3"]
V6_OTHER = "fd00:6b74:6370:2::1"
CLONE_NEWNET = 0x40000000


def add_v6_addresses():
    for a in V6_SAME + [V6_OTHER]:
        subprocess.run(["ip", "-6", "addr", "replace", f"{a}/64", "dev", "lo", "nodad"],
                       check=True, timeout=10)


@contextlib.contextmanager
def own_netns():
    """This thread (and what it starts) in a fresh network namespace with
    lo up and the test's addresses; back in the old one after."""
    libc = ctypes.CDLL(None, use_errno=True)
    old = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            pytest.skip(f"no network namespace here: {os.strerror(ctypes.get_errno())}")
        try:
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
            add_v6_addresses()
            yield
        finally:
            assert libc.setns(old, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(old)


def test_ipv6_counted_per_64(request, engine):
    """Three addresses of one /64 are one client by default (per_ip_v6_prefix
    64): with max_conns_per_ip=2 the third is refused; an address of another
    /64 has its own count. User engines run in a network namespace of their
    own; the modules (listening in the first one) in the VM, whose lo gets
    the addresses."""
    user = request.node.callspec.params["engine"] in USER
    with own_netns() if user else contextlib.nullcontext():
        if not user:
            add_v6_addresses()
        m = engine(ipv6="::", max_conns_per_ip=2)
        kept = []
        try:
            for src in V6_SAME[:2]:
                kept.append(m.connect(V6_SAME[0], source=src))
                assert m.served(kept[-1]), f"{src} refused"
            with m.connect(V6_SAME[0], source=V6_SAME[2]) as third:
                assert not m.served(third), f"{V6_SAME[2]} was counted apart from its /64"
            with m.connect(V6_SAME[0], source=V6_OTHER) as other:
                assert m.served(other), "an address of another /64 was refused"
        finally:
            for s in kept:
                s.close()
            m.stop()
