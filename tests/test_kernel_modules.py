"""Kernel-only checks, run inside the VM: kecho unload under load, slab
memory over many connections, parameter validation, and drop-tcp-socket.
(scripts/vm fails the whole run on BUG/WARNING/Oops in the guest's dmesg.)
"""
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from testlib import ROOT, free_port, require_kind, run, slab_bytes, wait_port, module_path
from echo_engines import KECHO_KO, KernelEcho

DROP_KO = module_path("drop_tcp_socket")
DROP_PROC = "/proc/net/drop_tcp_sock"


@pytest.fixture(autouse=True)
def kernel_only():
    require_kind("kernel")


def module_loaded(name):
    with open("/proc/modules") as f:
        return any(line.split()[0] == name for line in f)




def slab_active(cache):
    with open("/proc/slabinfo") as f:
        for line in f.readlines()[2:]:
            fields = line.split()
            if fields[0] == cache:
                return int(fields[1])
    return None


def test_kecho_rejects_bad_parameters():
    for bad in (["wq_mode=sideways"], ["port=0"], ["max_conns=0"]):
        r = run(["insmod", KECHO_KO] + bad, check=False)
        assert r.returncode != 0, f"kecho loaded with {bad}"
        assert not module_loaded("kecho")


def test_kecho_parameters_visible_read_only():
    echo = KernelEcho("highpri").start(idle_timeout_ms=1234)
    try:
        base = "/sys/module/kecho/parameters"
        assert open(f"{base}/wq_mode").read().strip() == "highpri"
        assert open(f"{base}/idle_timeout_ms").read().strip() == "1234"
        assert open(f"{base}/port").read().strip() == str(echo.port)
        assert oct(os.stat(f"{base}/port").st_mode & 0o777) == "0o444"
    finally:
        echo.stop()


@pytest.mark.parametrize("wq_mode", ["unbound", "bound", "highpri", "cpu_intensive"])
def test_kecho_every_wq_mode_echoes(wq_mode):
    echo = KernelEcho(wq_mode).start()
    try:
        data = os.urandom(100_000)
        with socket.create_connection(("127.0.0.1", echo.port), timeout=20) as s:
            t = threading.Thread(target=s.sendall, args=(data,))
            t.start()
            got = bytearray()
            while len(got) < len(data):
                b = s.recv(65536)
                assert b
                got += b
            t.join()
            assert bytes(got) == data
    finally:
        echo.stop()


def test_kecho_unload_with_100_live_connections():
    echo = KernelEcho("unbound").start()
    socks = []
    try:
        for i in range(100):
            s = socket.create_connection(("127.0.0.1", echo.port), timeout=20)
            if i % 2:  # half are mid-stream: unread echo waiting for them
                s.sendall(os.urandom(50_000))
            socks.append(s)
        time.sleep(0.5)
        assert echo.counters()["active"] == 100
        t0 = time.monotonic()
        echo.stop()  # rmmod, bounded by a timeout
        assert time.monotonic() - t0 < 10, "rmmod with live connections was slow"
        assert not module_loaded("kecho")
        for s in socks:  # every client sees its connection end
            s.settimeout(10)
            try:
                while s.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    finally:
        for s in socks:
            s.close()
        echo.stop()


def test_kecho_slab_does_not_grow_over_10000_connections():
    echo = KernelEcho("unbound").start()
    try:
        def churn(n):
            for i in range(n):
                with socket.create_connection(("127.0.0.1", echo.port), timeout=20) as s:
                    s.sendall(b"m%d" % i)
                    s.recv(64)
        churn(500)  # warm caches and per-CPU slabs
        time.sleep(1)
        before = slab_bytes()
        churn(10_000)
        deadline = time.monotonic() + 30
        while echo.counters()["active"] and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        after = slab_bytes()
        assert echo.counters()["active"] == 0
        assert slab_active("kecho_conn") in (0, None) or slab_active("kecho_conn") < 64
        # A leak of the 4 KiB connection or of the socket would be 20-40 MB.
        assert after - before < 2 * 1024 * 1024, f"slab grew by {after - before} bytes"
    finally:
        echo.stop()


# --- drop-tcp-socket -----------------------------------------------------

TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "0A": "LISTEN"}


def hex_to_addr(h, family):
    addr, port = h.split(":")
    raw = bytes.fromhex(addr)
    if family == socket.AF_INET:
        raw = raw[::-1]
    else:
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(family, raw), int(port, 16)


def tcp_sockets():
    """(local, remote, state) for every TCP socket, from /proc/net/tcp{,6}."""
    out = []
    for path, fam in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(path) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                out.append((hex_to_addr(fields[1], fam), hex_to_addr(fields[2], fam),
                            TCP_STATES.get(fields[3], fields[3])))
    return out


@pytest.fixture
def drop_module():
    run(["insmod", DROP_KO])
    yield DROP_PROC
    run(["rmmod", "drop_tcp_socket"])


def make_time_wait(family, host):
    """A closed connection whose client end (the first to close) sits in
    TIME-WAIT; returns (client_addr, server_addr)."""
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.bind((host, 0))
    srv.listen()
    c = socket.socket(family, socket.SOCK_STREAM)
    c.connect(srv.getsockname()[:2])
    a, _ = srv.accept()
    client, server = c.getsockname()[:2], c.getpeername()[:2]
    c.close()
    time.sleep(0.1)
    a.close()
    srv.close()
    time.sleep(0.2)
    return client, server


def fmt(addr, family):
    host, port = addr
    return f"[{host}]:{port}" if family == socket.AF_INET6 and port % 2 else f"{host}:{port}"


def state_of(local, remote):
    for l, r, st in tcp_sockets():
        if l == local and r == remote:
            return st
    return None


@pytest.mark.parametrize("family,host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_drop_removes_time_wait(drop_module, family, host):
    pairs = [make_time_wait(family, host) for _ in range(3)]
    for client, server in pairs:
        assert state_of(client, server) == "TIME_WAIT"
    # Several pairs in one write; the last without trailing whitespace.
    text = "\n".join(f"{fmt(c, family)} {fmt(s, family)}" for c, s in pairs)
    with open(drop_module, "w") as f:
        f.write(text)
    for client, server in pairs:
        assert state_of(client, server) is None, f"{client} {server} still there"


def test_drop_aborts_established(drop_module):
    srv = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(srv.getsockname())
    a, _ = srv.accept()
    try:
        with open(drop_module, "w") as f:
            f.write(f"{fmt(c.getsockname(), socket.AF_INET)} {fmt(c.getpeername(), socket.AF_INET)}\n")
        c.settimeout(5)
        with pytest.raises(OSError):
            c.sendall(b"x")
            c.recv(1)
    finally:
        for s in (c, a, srv):
            s.close()


@pytest.mark.parametrize("bad", [
    "127.0.0.1:1",                       # half a pair
    "127.0.0.1:99999 127.0.0.1:80",      # port out of range
    "127.0.0.1 127.0.0.1:80",            # no port
    "300.0.0.1:80 127.0.0.1:80",         # bad IPv4
    "127.0.0.1:80 [::1]:80",             # mixed families
    "hello world",
])
def test_drop_refuses_malformed_and_drops_nothing(drop_module, bad):
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    good = f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}\n"
    fd = os.open(drop_module, os.O_WRONLY)
    try:
        with pytest.raises(OSError) as e:
            os.write(fd, (good + bad).encode())
        assert e.value.errno == 22  # EINVAL
    finally:
        os.close(fd)
    assert state_of(client, server) == "TIME_WAIT", "a refused write dropped a socket"
