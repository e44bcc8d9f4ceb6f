"""Shared test helpers (imported as `testlib`): an engine is a fixture.

A test file asks for an engine fixture (echo_engine, http_engine, ...) that is
parametrised over every engine of that protocol. Which engines run is chosen
by KTCP_ENGINES: "user" (the default: user-space engines on the host) or
"kernel" (kernel engines; set by scripts/vm inside the guest), or "all".
An engine that is not selected is skipped with the reason written out.
"""
import contextlib
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
# How engines start, stop and are waited for, and where the builds are: one
# package for the suites and the bench (tools/engines).
from engines import tlscert  # noqa: E402
from engines import (BUILD, free_port, in_vm, module_path, run,  # noqa: E402,F401
                     stats_file_counters, wait_port)


def selected_kinds():
    v = os.environ.get("KTCP_ENGINES", "user")
    return {"user", "kernel"} if v == "all" else {v}


def skip_on_debug_kernel():
    """Slab figures are measured on the release kernels: on the debug
    kernel KASAN's redzones and quarantine change them (and kmemleak checks
    for leaks instead), and thousands of connections take many minutes.
    A test that calls this is marked release_kernel too, so that make check
    runs it on release 6.12 when 6.12's suites run on the debug kernel."""
    if "ktcp-debug" in os.uname().release:
        pytest.skip("a slab measurement: release kernels only (the debug kernel's "
                    "kmemleak checks leaks)")


def only_on_kernel(series):
    """A slow guest test whose subject does not change between the kernels
    (a bound khttpd keeps, a director's behaviour): make check runs it on
    one series only ("6.12"), which keeps make check within its hour with
    two kernels."""
    if not os.uname().release.startswith(series + "."):
        pytest.skip(f"run on {series} only (make check's time; its subject is the "
                    "same on every kernel)")


def slub_debug():
    """The kernel was booted with slub_debug (scripts/vm's memory detectors):
    slab objects carry red zones and tracking, so slab figures are bigger."""
    try:
        with open("/proc/cmdline") as f:
            return "slub_debug" in f.read()
    except OSError:
        return False


def require_kind(kind):
    """Skip the calling test unless engines of this kind were selected."""
    if kind not in selected_kinds():
        where = "inside the VM (make check-vm)" if kind == "kernel" else "on the host (make check-host)"
        pytest.skip(f"{kind} engines run {where}; KTCP_ENGINES={os.environ.get('KTCP_ENGINES', 'user')}")
    if kind == "kernel" and not in_vm():
        pytest.skip("kernel engines are loaded only inside the project VM (scripts/vm)")


def tls_stat():
    """The kernel's kTLS counters (/proc/net/tls_stat: TlsTxSw, TlsRxSw...
    count the sessions whose records the kernel wrote or read); {} where
    the kernel has no tls module loaded."""
    try:
        with open("/proc/net/tls_stat") as f:
            return {k: int(v) for k, v in (line.split() for line in f if line.strip())}
    except OSError:
        return {}


def connect(port, timeout=10):
    """A client socket to 127.0.0.1:port with Nagle off; over TLS when
    port is a TLS engine's (engines.tlscert)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return tlscert.wrap(s, port)


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


# The slab caches of a loopback connection's two sockets and the client's
# file: the same whatever server holds the connection.
SOCKET_CACHES = ("TCP", "TCPv6", "sock_inode_cache", "filp", "dentry", "lsm_inode_cache",
                 "lsm_file_cache")


def slab_bytes_beyond_sockets():
    """slab_bytes() without SOCKET_CACHES: what a server's own connection
    objects and buffers grow, the sockets' share left out."""
    return slab_bytes(exclude=("tw_sock_TCP", "tw_sock_TCPv6", "request_sock_TCP",
                               "request_sock_TCPv6") + SOCKET_CACHES)


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


def readme_commands(heading, count):
    """The non-blank lines of the first sh block under README's heading
    (which the README tests run exactly as written); there must be count."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index(heading):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) == count, lines
    return lines


def module_loaded(name):
    """Whether the module name is loaded (inside the VM)."""
    with open("/proc/modules") as f:
        return any(line.split()[0] == name for line in f)


def port_free(port):
    """Whether a README command's fixed port can be bound here."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def start_background(line, cwd):
    """Run a README line that ends in '&' (a server) in cwd; its pid. The
    output goes to cwd/serve.log: a pipe would stay open in the server."""
    import subprocess
    log = os.path.join(cwd, "serve.log")
    with open(log, "w") as f:
        subprocess.run(["bash", "-c", line + "\necho pid=$!"], cwd=cwd, check=True,
                       timeout=60, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    return int(re.search(r"pid=(\d+)", open(log).read()).group(1))


@contextlib.contextmanager
def served_config(text, prefix="ktcp-conf-"):
    """A ktcp-httpd --config file holding text, in a folder of its own that
    every user may read: the server reads it again on SIGHUP as the user
    it serves as. Yields its path; removes the folder afterwards."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        os.chmod(d, 0o755)
        conf = pathlib.Path(d) / "ktcp-httpd.conf"
        conf.write_text(text)
        conf.chmod(0o644)
        yield conf
    finally:
        shutil.rmtree(d)


def httpd_refuses(*args):
    """ktcp-httpd started with args (on port 1, never reached) must refuse
    them at start-up with exit status 2; returns what it wrote to stderr."""
    from engines.httpd import HTTPD_BIN
    r = subprocess.run([HTTPD_BIN, "--port", "1", *args], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2, r
    return r.stderr


def strace_counts(pid, client):
    """System calls of every thread of pid while client() runs: strace -f
    -c attached before, detached after, read by make bench-cost's own
    helpers. {name: calls}."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import cost

    out = f"/tmp/ktcp-strace-{pid}.txt"
    st = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not cost.traced_by(pid, st.pid):  # or the first calls go uncounted
            assert time.monotonic() < deadline and st.poll() is None, "strace did not attach"
            time.sleep(0.01)
        time.sleep(0.05)
        client()
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(timeout=30)
    calls, _ = cost.parse_strace(out)
    os.unlink(out)
    return calls
