"""Kernel-only checks, run inside the VM: kecho unload under load, slab
memory over many connections, parameter validation; and the connection
lifecycle both modules share (kernel/common/) checked through
each of them: an aborted listener, bind, dual-stack whatever
net.ipv6.bindv6only says, the accept path (a listener per online CPU in
bound mode, bursts of connections, max_conns under a burst, unload during
a connect storm and loading again) (drop_tcp_socket.ko has its own file,
test_drop_tcp_socket.py; max_conns_per_ip is checked on every engine,
test_conn_per_ip.py).
(scripts/vm fails the whole run on BUG/WARNING/Oops in the guest's dmesg.)
"""
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from testlib import (skip_on_debug_kernel, slub_debug, ROOT, free_port, kthread_pids, module_loaded, module_path, port_free,
                     readme_commands, recv_exact, require_kind, run, slab_bytes, slab_bytes_beyond_sockets,
                     task_cpu_seconds, wait_port)
from engines import KernelEcho
from engines.base import parse_counters

KECHO_KO = module_path("kecho")


@pytest.fixture(autouse=True)
def kernel_only():
    require_kind("kernel")


def slab_active(cache):
    with open("/proc/slabinfo") as f:
        for line in f.readlines()[2:]:
            fields = line.split()
            if fields[0] == cache:
                return int(fields[1])
    return None


def test_kecho_rejects_bad_parameters():
    for bad in (["mode=sideways"], ["wq_mode=sideways"], ["port=0"], ["max_conns=0"], ["bind=localhost"],
                ["bind=127.0.0.300"], ["bind=127.0.0.1:80"], ["per_ip_v6_prefix=0"],
                ["max_conns_per_ip=-2"]):
        r = run(["insmod", KECHO_KO] + bad, check=False)
        assert r.returncode != 0, f"kecho loaded with {bad}"
        assert not module_loaded("kecho")


def test_kecho_parameters_visible_read_only():
    echo = KernelEcho("highpri").start(idle_timeout_ms=1234)
    try:
        base = "/sys/module/kecho/parameters"
        assert open(f"{base}/mode").read().strip() == "highpri"
        assert open(f"{base}/wq_mode").read().strip() == "highpri"  # its old name
        assert open(f"{base}/idle_timeout_ms").read().strip() == "1234"
        assert open(f"{base}/port").read().strip() == str(echo.port)
        assert oct(os.stat(f"{base}/port").st_mode & 0o777) == "0o444"
    finally:
        echo.stop()


def test_kecho_old_parameter_name_wq_mode():
    """wq_mode, the old name of mode, still chooses the workqueue."""
    port = free_port()
    run(["insmod", KECHO_KO, f"port={port}", "wq_mode=bound"])
    try:
        assert open("/sys/module/kecho/parameters/mode").read().strip() == "bound"
        wait_port(port)
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(b"old name")
            got = b""
            while len(got) < 8:
                b = s.recv(64)
                assert b, "closed before the echo"
                got += b
        assert got == b"old name"
    finally:
        run(["rmmod", "kecho"])


def echo_once(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(data)
        return recv_exact(s, len(data))


def test_readme_kecho_commands():
    """README's kecho.ko lines, run exactly as written from the top of the
    tree: the module loads with the parameters shown and echoes on port
    12345, and /proc/net/kecho holds every counter the comment names."""
    insmod, cat = readme_commands("## kecho.ko", 2)
    assert not module_loaded("kecho") and port_free(12345)
    run(["bash", "-c", insmod], cwd=ROOT)
    try:
        params = "/sys/module/kecho/parameters"
        for name, want in (("mode", "unbound"), ("idle_timeout_ms", "30000"),
                           ("max_conns", "10000")):
            assert open(f"{params}/{name}").read().strip() == want, name
        wait_port(12345)
        assert echo_once(12345, b"hello README") == b"hello README"
        counters = parse_counters(run(["bash", "-c", cat], cwd=ROOT).stdout)
        named = cat.split("#", 1)[1].split()
        assert set(named) <= set(counters), (named, counters)
        assert counters["accepted"] >= 1 and counters["bytes_in"] >= 12, counters
    finally:
        run(["rmmod", "kecho"])


def test_readme_ktcp_echo_commands():
    """README's ktcp-echo lines, exactly as written, in the VM (its own
    /tmp, and no other ktcp-echo for pidof to find): the server started
    by the first serves port 12345; the second signals it and prints the
    counters it then writes. The file appears once the server has handled
    the signal, so the line is run again (bounded) while it is missing."""
    serve, stats = readme_commands("## ktcp-echo", 2)
    assert port_free(12345)
    if os.path.exists("/tmp/echo.stats"):
        os.unlink("/tmp/echo.stats")
    proc = subprocess.Popen(["bash", "-c", "exec " + serve], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_port(12345, proc=proc)
        assert echo_once(12345, b"hello README") == b"hello README"
        for _ in range(20):
            r = run(["bash", "-c", stats], cwd=ROOT, check=False)
            if r.returncode == 0:
                break
            assert "No such file" in r.stderr, r.stderr
            time.sleep(0.1)
        assert r.returncode == 0, r.stderr
        counters = parse_counters(r.stdout)
        assert counters["accepted"] >= 1 and counters["bytes_in"] >= 12, counters
    finally:
        proc.terminate()
        out = proc.communicate(timeout=15)[0]
    assert proc.returncode == 0, out


@pytest.mark.parametrize("mode", ["unbound", "bound", "highpri", "cpu_intensive"])
def test_kecho_every_mode_echoes(mode):
    echo = KernelEcho(mode).start()
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


@pytest.mark.release_kernel
def test_kecho_slab_does_not_grow_over_10000_connections():
    skip_on_debug_kernel()
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
        # slub_debug (scripts/vm's detectors) makes every object bigger and
        # keeps more partial slabs: 2.2 MB measured on 6.1 where 2 MB held.
        bound = (4 if slub_debug() else 2) * 1024 * 1024
        assert after - before < bound, f"slab grew by {after - before} bytes"
    finally:
        echo.stop()


@pytest.mark.release_kernel
def test_kecho_idle_connections_hold_no_buffer():
    """An idle echo connection (one message echoed) holds no receive buffer:
    beyond its two sockets (about 6.5 KiB of slab, not the server's doing)
    what stays is the 224-byte connection, under 2 KiB per connection over
    1,000 of them (a 4 KiB buffer kept while idle made it 4 KiB)."""
    skip_on_debug_kernel()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    n = 1000
    echo = KernelEcho("unbound").start(idle_timeout_ms=0)
    held = []
    try:
        with socket.create_connection(("127.0.0.1", echo.port), timeout=20) as s:
            s.sendall(b"warm")
            s.recv(64)
        deadline = time.monotonic() + 10
        while echo.counters()["active"] and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        before, own0 = slab_bytes(), slab_bytes_beyond_sockets()
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", echo.port), timeout=20)
            msg = b"message %d" % i
            s.sendall(msg)
            got = b""
            while len(got) < len(msg):
                b = s.recv(64)
                assert b, got
                got += b
            assert got == msg
            held.append(s)
        time.sleep(1)
        after, own1 = slab_bytes(), slab_bytes_beyond_sockets()
        assert echo.counters()["active"] == n
        per, per_own = (after - before) / n, (own1 - own0) / n
        with open(os.path.join(ROOT, "build", "kecho-memory.txt"), "a") as f:
            f.write(f"{os.uname().release}: {n} idle echo connections: slabinfo "
                    f"{per / 1024:.1f} KiB ({per_own / 1024:.2f} KiB beyond the sockets) per "
                    f"connection (+{(after - before) >> 10} KiB)\n")
        assert per_own < 2 * 1024, \
            f"{per_own / 1024:.2f} KiB slab per idle echo connection beyond its sockets"
    finally:
        for s in held:
            s.close()
        echo.stop()


# ------------------------------------------ the lifecycle both modules share

KHTTPD_KO = module_path("khttpd")


class Served:
    """kecho.ko or khttpd.ko loaded with the given parameters; whether a
    connection is served is asked in each module's protocol."""

    def __init__(self, name, tmp_path, host="127.0.0.1", port=None, **params):
        self.name = name
        self.port = port or free_port()
        args = [f"port={self.port}"] + [f"{k}={v}" for k, v in params.items()]
        if name == "khttpd":
            (tmp_path / "a.txt").write_bytes(b"hello\n")
            tmp_path.chmod(0o755)  # khttpd reads as nobody
            args.append(f"root={tmp_path}")
        run(["insmod", module_path(name), *args])
        wait_port(self.port, host=host)
        time.sleep(0.2)  # the readiness probe's connection goes

    def stop(self):
        if module_loaded(self.name):
            t0 = time.monotonic()
            run(["rmmod", self.name], timeout=30)
            assert time.monotonic() - t0 < 20, f"rmmod {self.name} was slow"

    def counters(self):
        out = {}
        with open(f"/proc/net/{self.name}") as f:
            for line in f:
                k, v = line.split()[:2]
                out[k] = int(v)
        return out

    def connect(self, host="127.0.0.1", source=None):
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(10)
        if source:
            s.bind((source, 0))
        s.connect((host, self.port))
        return s

    def served(self, s):
        """True if the server answers on s; False if it refused it (closed,
        reset, or khttpd's 503)."""
        try:
            if self.name.endswith("echo"):
                s.sendall(b"x")
                return s.recv(1) == b"x"
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                b = s.recv(4096)
                if not b:
                    break
                got += b
            if got.startswith(b"HTTP/1.1 503 "):
                return False
            assert got.startswith(b"HTTP/1.1 200 ") or not got, got[:40]
            return bool(got)
        except (ConnectionResetError, BrokenPipeError):
            return False


@pytest.fixture(params=["kecho", "khttpd"])
def module(request, tmp_path):
    started = []

    def start(**params):
        m = Served(request.param, tmp_path, **params)
        started.append(m)
        return m

    start.module_name = request.param
    yield start
    for m in started:
        m.stop()


def abort_listener(port):
    """Abort the listening socket on port as an administrator would
    (ss -K: SOCK_DESTROY); what accept() then sees is the module's problem."""
    r = run(["ss", "-K", "-t", "-l", f"sport = :{port}"])
    assert f":{port}" in r.stdout, f"ss -K killed no listener on {port}: {r.stdout}"


def test_aborted_listener_stops_the_accept_thread_without_spinning(module):
    m = module()
    name = m.name
    [pid] = kthread_pids(f"{name}-accept")
    dmesg_before = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    abort_listener(m.port)
    time.sleep(0.5)
    t0 = task_cpu_seconds(pid)
    time.sleep(2.0)
    used = task_cpu_seconds(pid) - t0
    assert used < 0.1, f"{name}-accept used {used:.2f} s of CPU in 2 s after its listener died"
    dmesg = subprocess.run(["dmesg"], capture_output=True, text=True).stdout[len(dmesg_before):]
    assert "listener is gone" in dmesg, dmesg[-2000:]
    assert m.counters()["errors"] >= 1
    m.stop()  # rmmod still works, and quickly
    assert not module_loaded(name)


def test_bind_ipv4_address_serves_only_there(module):
    m = module(bind="127.0.0.1")
    with m.connect("127.0.0.1") as s:
        assert m.served(s)
    for other in ("127.0.0.2", "::1"):
        with pytest.raises(ConnectionRefusedError):
            m.connect(other).close()


def test_bind_ipv6_address_serves_only_there(module):
    m = module(bind="::1", host="::1")
    with m.connect("::1") as s:
        assert m.served(s)
    with pytest.raises(ConnectionRefusedError):
        m.connect("127.0.0.1").close()


@pytest.fixture
def bindv6only():
    path = "/proc/sys/net/ipv6/bindv6only"
    old = open(path).read().strip()
    with open(path, "w") as f:
        f.write("1")
    yield
    with open(path, "w") as f:
        f.write(old)


def test_dual_stack_whatever_bindv6only_says(bindv6only, module):
    m = module()
    for host in ("127.0.0.1", "::1"):
        with m.connect(host) as s:
            assert m.served(s), host


# ------------------------------------------------------------ the accept path

# Each module's modes: bound is the per-CPU workqueue (a listener per CPU).
MODES = {
    "kecho": {"unbound": {"mode": "unbound"}, "bound": {"mode": "bound"}},
    "khttpd": {"unbound": {"mode": "unbound"}, "bound": {"mode": "bound"},
               "kthread": {"mode": "kthread"}},
}


def mode_params(name, mode):
    if mode not in MODES[name]:
        pytest.skip(f"{name} has no mode {mode}")
    return dict(MODES[name][mode])


def module_name(start):
    """The module a `module` fixture starts (its closure's parameter)."""
    return start.module_name


def online_cpus():
    cpus = []
    with open("/sys/devices/system/cpu/online") as f:
        for part in f.read().strip().split(","):
            lo, _, hi = part.partition("-")
            cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def listening_sockets(port):
    """How many TCP sockets listen on port (IPv4 and IPv6 tables)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    n += 1
    return n


def task_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(key)


def wait_counter(m, key, value, timeout=20):
    deadline = time.monotonic() + timeout
    while m.counters()[key] != value:
        assert time.monotonic() < deadline, f"{key} {m.counters()[key]}, expected {value}"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["unbound", "bound", "kthread"])
def test_bound_mode_listens_once_per_cpu_and_accepts_there(module, mode):
    """mode bound: one listener per online CPU on the one port, each drained
    by an accept thread bound to its CPU, and a connection made from a CPU
    is accepted by that CPU's thread (SO_INCOMING_CPU); the other modes
    keep one listener and one accept thread."""
    m = module(**mode_params(module_name(module), mode))
    cpus = online_cpus()
    if mode != "bound":
        assert listening_sockets(m.port) == 1
        assert len(kthread_pids(f"{m.name}-accept")) == 1
        return
    assert listening_sockets(m.port) == len(cpus)
    threads = {}
    for cpu in cpus:
        [pid] = kthread_pids(f"{m.name}-accept/{cpu}")
        assert task_status(pid, "Cpus_allowed_list") == str(cpu)
        threads[cpu] = pid
    before = m.counters()["accepted"]
    saved = os.sched_getaffinity(0)
    try:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            woken = int(task_status(threads[cpu], "voluntary_ctxt_switches"))
            for _ in range(20):
                with m.connect() as s:
                    assert m.served(s)
            after = int(task_status(threads[cpu], "voluntary_ctxt_switches"))
            assert after > woken, f"cpu {cpu}'s accept thread never woke for its connections"
    finally:
        os.sched_setaffinity(0, saved)
    assert m.counters()["accepted"] - before == 20 * len(cpus)


@pytest.mark.parametrize("mode", ["unbound", "bound", "kthread"])
def test_burst_of_500_connects_all_served(module, mode):
    """500 connections made at once (all in the listen queue before the
    first is served) are every one accepted and answered."""
    m = module(**mode_params(module_name(module), mode))
    wait_counter(m, "active", 0)
    before = m.counters()["accepted"]
    socks = [m.connect() for _ in range(500)]
    try:
        unserved = [i for i, s in enumerate(socks) if not m.served(s)]
        assert not unserved, f"{len(unserved)} of 500 not served, first {unserved[:5]}"
        assert m.counters()["accepted"] - before == 500
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("mode", ["unbound", "bound", "kthread"])
def test_max_conns_holds_under_a_burst(module, mode):
    """max_conns=50 and 200 connections at once, all held open: exactly 50
    are served, whichever listener took them, and 150 refused."""
    m = module(max_conns=50, **mode_params(module_name(module), mode))
    wait_counter(m, "active", 0)
    refused = m.counters()["refused"]
    socks = [m.connect() for _ in range(200)]
    try:
        served = sum(m.served(s) for s in socks)
        assert served == 50
        assert m.counters()["active"] == 50
        assert m.counters()["refused"] - refused == 150
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("mode", ["unbound", "bound"])
def test_unload_during_a_connect_storm_then_load_again(module, mode):
    """rmmod while two clients connect as fast as they can completes in
    bounded time (Served.stop) with a clean dmesg; loaded again on the same
    port the module serves at once."""
    params = mode_params(module_name(module), mode)
    m = module(**params)
    stop = threading.Event()
    made = [0, 0]

    def storm(k):
        for _ in range(5000):  # bounded however fast the server is
            if stop.is_set():
                return
            try:
                with socket.create_connection(("127.0.0.1", m.port), timeout=2) as s:
                    s.sendall(b"GET /a.txt HTTP/1.0\r\n\r\n" if m.name == "khttpd" else b"x")
                    made[k] += 1
            except OSError:
                time.sleep(0.01)

    clients = [threading.Thread(target=storm, args=(k,)) for k in range(2)]
    for t in clients:
        t.start()
    try:
        time.sleep(1.0)
        m.stop()
        assert not module_loaded(m.name)
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=30)
    assert sum(made) > 0, "the storm made no connection"
    assert not any(t.is_alive() for t in clients)
    again = module(port=m.port, **params)
    with again.connect() as s:
        assert again.served(s)


@pytest.mark.parametrize("mode", ["unbound", "bound"])
def test_load_fails_whole_when_the_port_is_taken(module, tmp_path, mode):
    """A port another socket holds (without SO_REUSEPORT) fails the load: no
    listener, no accept thread, nothing left loaded; with the port free
    again the same load serves."""
    name = module_name(module)
    params = mode_params(name, mode)
    port = free_port()
    holder = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    holder.bind(("::", port))
    holder.listen(8)
    try:
        args = [f"port={port}"] + [f"{k}={v}" for k, v in params.items()]
        if name == "khttpd":
            tmp_path.chmod(0o755)
            args.append(f"root={tmp_path}")
        r = run(["insmod", module_path(name), *args], check=False)
        assert r.returncode != 0, "insmod succeeded on a taken port"
        assert not module_loaded(name)
        assert not [p for p in os.listdir("/proc") if p.isdigit() and
                    open_comm(p).startswith(f"{name}-accept")]
        assert listening_sockets(port) == 1  # the holder's alone
    finally:
        holder.close()
    m = module(port=port, **params)
    with m.connect() as s:
        assert m.served(s)


def open_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_guest_runs_four_level_paging():
    """scripts/vm boots every guest with no5lvl: with QEMU's LA57 an
    interrupt taken while identify_cpu() refills the boot CPU's feature
    bits saw 4-level bounds in a 5-level kernel, and the debug kernel's
    boot stopped in KASAN reports (docs/reliability.md)."""
    if os.environ.get("KTCP_IN_VM") != "1":
        pytest.skip("a property of the project's VM (scripts/vm)")
    with open("/proc/cmdline") as f:
        assert "no5lvl" in f.read().split()
    with open("/proc/cpuinfo") as f:
        flags = [l for l in f if l.startswith("flags")]
    assert flags and not any(" la57" in l for l in flags), flags[0]
