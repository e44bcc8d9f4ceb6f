"""Shared test helpers (imported as `testlib`): an engine is a fixture.

A test file asks for an engine fixture (echo_engine, http_engine, ...) that is
parametrised over every engine of that protocol. Which engines run is chosen
by KTCP_ENGINES: "user" (the default: user-space engines on the host) or
"kernel" (kernel engines; set by scripts/vm inside the guest), or "all".
An engine that is not selected is skipped with the reason written out.
"""
import os
import signal
import socket
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")


def module_path(name):
    """The .ko of kernel/<name>/ built for the running kernel (make modules
    writes build/modules/<release>/kernel/<name>/<name>.ko); KTCP_KO_DIR
    names another folder holding <name>.ko (an older build, to show that a
    test fails without a fix)."""
    other = os.environ.get("KTCP_KO_DIR")
    if other:
        return os.path.join(other, name + ".ko")
    return os.path.join(BUILD, "modules", os.uname().release, "kernel", name, name + ".ko")


def selected_kinds():
    v = os.environ.get("KTCP_ENGINES", "user")
    return {"user", "kernel"} if v == "all" else {v}


def in_vm():
    return os.environ.get("KTCP_IN_VM") == "1"


def skip_on_debug_kernel():
    """Slab figures are measured on the release kernels: on the debug
    kernel KASAN's redzones and quarantine change them (and kmemleak checks
    for leaks instead), and thousands of connections take many minutes."""
    if "ktcp-debug" in os.uname().release:
        pytest.skip("a slab measurement: release kernels only (the debug kernel's "
                    "kmemleak checks leaks)")


def require_kind(kind):
    """Skip the calling test unless engines of this kind were selected."""
    if kind not in selected_kinds():
        where = "inside the VM (make check-vm)" if kind == "kernel" else "on the host (make check-host)"
        pytest.skip(f"{kind} engines run {where}; KTCP_ENGINES={os.environ.get('KTCP_ENGINES', 'user')}")
    if kind == "kernel" and not in_vm():
        pytest.skip("kernel engines are loaded only inside the project VM (scripts/vm)")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, host="127.0.0.1", timeout=20.0, proc=None):
    """Wait until something accepts on host:port; fail early if proc died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def run(cmd, check=True, **kw):
    """Run a command, showing its output in the test log when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def connect(port, timeout=10):
    """A client socket to 127.0.0.1:port with Nagle off."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    """Exactly n bytes from s; EOF before that fails the test."""
    chunks, got = [], 0
    while got < n:
        b = s.recv(min(1 << 20, n - got))
        if not b:
            raise AssertionError(f"EOF after {got} of {n} bytes")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def slab_bytes(exclude=("tw_sock_TCP", "tw_sock_TCPv6", "request_sock_TCP", "request_sock_TCPv6")):
    """Bytes held by slab objects (/proc/slabinfo, root only), TIME-WAIT and
    request buckets excepted: those belong to a test's clients and the kernel
    frees them on its own schedule."""
    total = 0
    with open("/proc/slabinfo") as f:
        for line in f.readlines()[2:]:
            fields = line.split()
            if fields[0] in exclude:
                continue
            total += int(fields[1]) * int(fields[3])
    return total


def kthread_pids(comm):
    """Pids of the tasks whose name is comm (a module's kernel threads)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == comm:
                        out.append(int(pid))
            except OSError:
                pass
    return out


def task_cpu_seconds(pid):
    """User + system CPU time a task has used (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats_file_counters(proc, path, timeout=5.0):
    """The counters a user-space server writes to its --stats-file on
    SIGUSR1 (user/rt/rt-cli.c: "name value" lines, written aside and
    renamed), fresh: the old file is removed first."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no counters in {path} after SIGUSR1"
        time.sleep(0.01)
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f.read().splitlines())}
