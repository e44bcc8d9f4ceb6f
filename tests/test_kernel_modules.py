"""Kernel-only checks, run inside the VM: kecho unload under load, slab
memory over many connections, parameter validation (drop_tcp_socket.ko has
its own file, test_drop_tcp_socket.py).
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
