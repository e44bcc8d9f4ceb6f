"""Which worker accepts a connection (user/rt/rt-steer.c): with one epoll
or mn worker per CPU, a new connection goes to the worker of the CPU that
took its SYN. On loopback that is the client's CPU, so a client held on
one CPU sends every connection to one worker, which no hash would do: the
server sees the skew and hands the choice back to the kernel's hash,
saying so once. With --accept-steer hash the same client is spread by the
hash from the start. ktcp-httpd (epoll, mn) and ktcp-echo alike."""
import os
import socket
import subprocess
import sys
import time

import pytest

from testlib import require_kind
from engines import UserEcho, UserHttpd

OFF = "accept steering by CPU off"


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


def start(kind, tmp_path, *args):
    require_kind("user")
    n = cpus()
    if kind == "echo":
        return UserEcho(str(tmp_path), model="epoll").start(threads=n, args=args)
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "f").write_bytes(b"steered\n")
    return UserHttpd(kind, str(tmp_path)).start(str(root), threads=n, args=args)


def off_lines(engine, wait_s):
    deadline = time.monotonic() + wait_s
    while True:
        lines = [l for l in engine.log_text().splitlines() if OFF in l]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


KINDS = ["epoll", "mn", "echo"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_cpu_of_syns_turns_steering_to_the_hash(kind, tmp_path):
    e = start(kind, tmp_path)
    try:
        last = cpus() - 1
        lines = []
        # batches until a second's window held enough of them (a slow
        # machine may split the first batch over two windows); then the
        # next loop judges
        for _ in range(4):
            connections_from(last, e.port, 400, kind)
            time.sleep(1.2)
            connections_from(last, e.port, 5, kind)
            lines = off_lines(e, 2)
            if lines:
                break
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

