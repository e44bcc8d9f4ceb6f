"""Which worker accepts a connection (user/rt/rt-steer.c): with one epoll
or mn worker per CPU, a new connection goes to the worker of the CPU that
took its SYN. On loopback that is the client's CPU, so a client held on
one CPU sends every connection to one worker, which no hash would do: the
server sees the skew and hands the choice back to the kernel's hash,
saying so once. When connections come in on every CPU again, steering
comes back, and says so. With --accept-steer hash the same client is
spread by the hash from the start. ktcp-httpd (epoll, mn) and ktcp-echo
alike."""
import os
import socket
import subprocess
import sys
import time

import pytest

from testlib import require_kind
from engines import UserEcho, UserHttpd

OFF = "accept steering by CPU off"
BACK = "accept steering by CPU back on"


def cpus():
    """The CPUs this process may run on, when they are 0..n-1 (the
    servers steer only then), else skip."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2 or allowed != list(range(len(allowed))):
        pytest.skip(f"steering needs CPUs 0..n-1, n >= 2; allowed here: {allowed}")
    return len(allowed)


CLIENT = r"""
import socket, sys
port, n, echo = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "echo"
for i in range(n):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        if echo:
            s.sendall(b"x\n")
            assert s.recv(2) == b"x\n"
        else:
            s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            assert data.startswith(b"HTTP/1.1 200"), data[:80]
"""


def connections_from(cpu, port, n, kind):
    """n connections one after another from a process held on cpu."""
    subprocess.run([sys.executable, "-c", CLIENT, str(port), str(n), kind], check=True,
                   timeout=120, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def connections_from_every_cpu(port, n, kind):
    """n connections from each CPU at once, a process held on each."""
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, str(port), str(n), kind],
                              preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
             for cpu in range(cpus())]
    for p in procs:
        assert p.wait(timeout=120) == 0


def start(kind, tmp_path, *args):
    require_kind("user")
    n = cpus()
    if kind == "echo":
        return UserEcho(str(tmp_path), model="epoll").start(threads=n, args=args)
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "f").write_bytes(b"steered\n")
    return UserHttpd(kind, str(tmp_path)).start(str(root), threads=n, args=args)


def said(engine, what, wait_s, at_least=1):
    """The server's lines that say what, waiting up to wait_s for
    at_least of them."""
    deadline = time.monotonic() + wait_s
    while True:
        lines = [l for l in engine.log_text().splitlines() if what in l]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def off_lines(engine, wait_s, at_least=1):
    return said(engine, OFF, wait_s, at_least)


def turn_off_from(cpu, e, kind, at_least=1):
    """Connections from one CPU, in batches until a second's window held
    enough of them (a slow machine may split the first batch over two
    windows) and the next loop judged: the server's OFF lines."""
    lines = []
    for _ in range(4):
        connections_from(cpu, e.port, 400, kind)
        time.sleep(1.2)
        connections_from(cpu, e.port, 5, kind)
        lines = off_lines(e, 2, at_least)
        if len(lines) >= at_least:
            break
    return lines


KINDS = ["epoll", "mn", "echo"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_cpu_of_syns_turns_steering_to_the_hash(kind, tmp_path):
    e = start(kind, tmp_path)
    try:
        last = cpus() - 1
        lines = turn_off_from(last, e, kind)
        assert len(lines) == 1, e.log_text()[-2000:]
        # that CPU's connections went to the worker of that number
        assert f"worker {last} took" in lines[0], lines[0]
        took, total = [int(w) for w in lines[0].split("took ")[1].split(" connections")[0].split(" of ")]
        # (the engine's own readiness probe may come from another CPU)
        assert took >= 256 and took * 100 >= total * 90, lines[0]
        # the hash from now on: the same client is still served, and the
        # server does not say it again
        connections_from(last, e.port, 300, kind)
        time.sleep(1.2)
        connections_from(0, e.port, 5, kind)
        assert len(off_lines(e, 1)) == 1
        assert said(e, BACK, 0) == []
    finally:
        e.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_steering_comes_back_when_connections_come_from_every_cpu(kind, tmp_path):
    e = start(kind, tmp_path)
    try:
        last = cpus() - 1
        assert len(turn_off_from(last, e, kind)) == 1, e.log_text()[-2000:]
        # under the hash, connections from every CPU at once: the sampled
        # ones came in on each, and steering comes back
        back = []
        for _ in range(4):
            connections_from_every_cpu(e.port, 400, kind)
            time.sleep(1.2)
            connections_from(0, e.port, 5, kind)
            back = said(e, BACK, 2)
            if back:
                break
        assert len(back) == 1, e.log_text()[-2000:]
        n, most, total = [int(w) for w in back[0].split("came in on ")[1]
                          .replace(" CPUs, the busiest ", " ").replace(" of ", " ")
                          .split(" sampled")[0].split()]
        assert n == cpus() and total >= 64 and most * 100 < total * 75, back[0]
        # steering again: one CPU's connections all reach that CPU's
        # worker, and the server turns to the hash a second time
        lines = turn_off_from(last, e, kind, at_least=2)
        assert len(lines) == 2, e.log_text()[-2000:]
        assert f"worker {last} took" in lines[1], lines[1]
    finally:
        e.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_accept_steer_hash_spreads_one_cpu_of_syns(kind, tmp_path):
    e = start(kind, tmp_path, "--accept-steer", "hash")
    try:
        connections_from(0, e.port, 400, kind)
        time.sleep(1.2)
        connections_from(0, e.port, 5, kind)
        assert off_lines(e, 2) == [], e.log_text()[-2000:]
    finally:
        e.stop()

