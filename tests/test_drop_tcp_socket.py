"""drop_tcp_socket.ko, inside the VM: pairs written to /proc/net/drop_tcp_sock
remove those sockets (TIME-WAIT descheduled, others aborted), IPv4, IPv6 and
IPv4-mapped, bound to a device or not; a malformed write drops nothing; a
write that matches nothing fails; only CAP_NET_ADMIN may write; and a write
of any size is read through a small buffer.

KTCP_DROP_KO=path tests another build of the module (an older one, say).
(scripts/vm fails the whole run on BUG/WARNING/Oops in the guest's dmesg.)
"""
import errno
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from testlib import ROOT, module_loaded, module_path, readme_commands, require_kind, run

DROP_KO = os.environ.get("KTCP_DROP_KO", module_path("drop_tcp_socket"))
DROP_PROC = "/proc/net/drop_tcp_sock"
# The module's limits (kernel/drop_tcp_socket/drop_tcp_socket.c).
DROP_MAX_WRITE = 256 * 1024
DROP_MAX_TOKEN = 48 + 8  # the kernel's INET6_ADDRSTRLEN + 8
CAP_NET_ADMIN = 12

TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "0A": "LISTEN"}


@pytest.fixture(autouse=True)
def kernel_only():
    require_kind("kernel")


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
    if not os.path.exists(DROP_KO):
        pytest.fail(f"{DROP_KO} is not built (make modules)")
    run(["insmod", DROP_KO])
    yield DROP_PROC
    run(["rmmod", "drop_tcp_socket"])


def make_time_wait(family, host, connect_to=None, device=None, v6only=True):
    """A closed connection whose client end (the first to close) sits in
    TIME-WAIT; returns (client_addr, server_addr) as the client sees them."""
    srv = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET6 and not v6only:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind((host, 0))
    srv.listen()
    c = socket.socket(family, socket.SOCK_STREAM)
    if device:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device)
    c.connect((connect_to or host, srv.getsockname()[1]))
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


def write_errno(data, path=DROP_PROC):
    """Write data in one write(2); 0 on success, else the errno."""
    fd = os.open(path, os.O_WRONLY)
    try:
        n = os.write(fd, data.encode() if isinstance(data, str) else data)
        assert n == len(data)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def assert_aborted(c, local, remote):
    """c's connection (local, remote) was aborted by the module: gone from
    the tables, and the next read reports ECONNABORTED (not a timeout:
    nothing arriving proves nothing)."""
    assert state_of(local, remote) is None, f"{local} {remote} still there"
    c.settimeout(5)
    with pytest.raises(OSError) as e:
        c.recv(1)
    assert e.value.errno == errno.ECONNABORTED, e.value


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
        local, remote = c.getsockname(), c.getpeername()
        assert state_of(local, remote) == "ESTABLISHED"
        with open(drop_module, "w") as f:
            f.write(f"{fmt(local, socket.AF_INET)} {fmt(remote, socket.AF_INET)}\n")
        assert_aborted(c, local, remote)
    finally:
        for s in (c, a, srv):
            s.close()


@pytest.mark.parametrize("bad", [
    "127.0.0.1:1",                       # half a pair
    "127.0.0.1:99999 127.0.0.1:80",      # port out of range
    "127.0.0.1 127.0.0.1:80",            # no port
    "300.0.0.1:80 127.0.0.1:80",         # bad IPv4
    "127.0.0.1:80 [::1]:80",             # mixed families
    "::ffff:127.0.0.1:80 [::1]:80",      # a mapped and a real IPv6 address
    "hello world",
    "1" * 5000 + ":80 127.0.0.1:80",     # an endpoint longer than any address
])
def test_drop_refuses_malformed_and_drops_nothing(drop_module, bad):
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    good = f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}\n"
    assert write_errno(good + bad) == errno.EINVAL
    assert state_of(client, server) == "TIME_WAIT", "a refused write dropped a socket"


# --- who may write ---------------------------------------------------------

def without_net_admin(code, **kw):
    """Run Python code as root without CAP_NET_ADMIN (a container sharing the
    host's network namespace): still uid 0, so the file's mode lets it in."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    prelude = (
        "import os\n"
        "eff = int([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1], 16)\n"
        f"assert os.geteuid() == 0 and not eff & (1 << {CAP_NET_ADMIN}), hex(eff)\n"
    )
    return subprocess.run(
        ["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin", "--",
         sys.executable, "-c", prelude + code],
        capture_output=True, text=True, timeout=30, **kw)


def test_writer_without_net_admin_refused(drop_module):
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    pair = f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}\n"
    p = without_net_admin(
        "import errno, os\n"
        f"fd = os.open({DROP_PROC!r}, os.O_WRONLY)\n"
        "try:\n"
        f"    os.write(fd, {pair!r}.encode())\n"
        "    print('written')\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno])\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "EPERM", p.stdout
    assert state_of(client, server) == "TIME_WAIT", "an unprivileged write dropped a socket"


def test_file_opened_without_net_admin_refused(drop_module):
    """Opened by a task without the capability, written by one with it (a
    descriptor passed over a socket): refused, as sock_diag refuses."""
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    pair = f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}\n"
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        p = without_net_admin(
            "import os, socket\n"
            f"s = socket.socket(fileno={theirs.fileno()})\n"
            f"fd = os.open({DROP_PROC!r}, os.O_WRONLY)\n"
            "socket.send_fds(s, [b'f'], [fd])\n",
            pass_fds=[theirs.fileno()])
        assert p.returncode == 0, p.stderr
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
    finally:
        ours.close()
        theirs.close()
    assert len(fds) == 1
    try:
        with pytest.raises(OSError) as e:
            os.write(fds[0], pair.encode())
        assert e.value.errno == errno.EPERM
    finally:
        os.close(fds[0])
    assert state_of(client, server) == "TIME_WAIT"


# --- which sockets match ---------------------------------------------------

@pytest.mark.parametrize("bracketed", [False, True])
def test_v4_mapped_pair_dropped(drop_module, bracketed):
    """A dual-stack socket talking IPv4 shows as ::ffff:a.b.c.d in netstat
    and /proc/net/tcp6; that pair must name it."""
    client, server = make_time_wait(socket.AF_INET6, "::", connect_to="::ffff:127.0.0.1",
                                    v6only=False)
    assert client[0] == "::ffff:127.0.0.1", client
    assert state_of(client, server) == "TIME_WAIT"
    if bracketed:
        text = f"[{client[0]}]:{client[1]} [{server[0]}]:{server[1]}"
    else:
        text = f"{client[0]}:{client[1]} {server[0]}:{server[1]}"
    assert write_errno(text) == 0
    assert state_of(client, server) is None, "the v4-mapped pair was not dropped"


def test_v4_mapped_established_aborted(drop_module):
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind(("::", 0))
    srv.listen()
    c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    c.connect(("::ffff:127.0.0.1", srv.getsockname()[1]))
    a, _ = srv.accept()
    try:
        local, remote = c.getsockname()[:2], c.getpeername()[:2]
        assert state_of(local, remote) == "ESTABLISHED"
        assert write_errno(f"{local[0]}:{local[1]} {remote[0]}:{remote[1]}\n") == 0
        assert_aborted(c, local, remote)
    finally:
        for s in (c, a, srv):
            s.close()


@pytest.mark.parametrize("family,host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_device_bound_time_wait_dropped(drop_module, family, host):
    """SO_BINDTODEVICE: the kernel's lookups find such a socket only for a
    packet from that device; a write must find it whatever the device."""
    client, server = make_time_wait(family, host, device=b"lo")
    assert state_of(client, server) == "TIME_WAIT"
    assert write_errno(f"{fmt(client, family)} {fmt(server, family)}") == 0
    assert state_of(client, server) is None, "the device-bound socket was not dropped"


def test_device_bound_established_aborted(drop_module):
    srv = socket.create_server(("127.0.0.1", 0))
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
    c.connect(srv.getsockname())
    a, _ = srv.accept()
    try:
        local, remote = c.getsockname(), c.getpeername()
        assert state_of(local, remote) == "ESTABLISHED"
        assert write_errno(f"{local[0]}:{local[1]} {remote[0]}:{remote[1]}") == 0
        assert_aborted(c, local, remote)
    finally:
        for s in (c, a, srv):
            s.close()


def test_write_matching_nothing_fails(drop_module):
    # a port nothing listens on or connects from
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        unused = s.getsockname()[1]
    assert write_errno(f"127.0.0.1:{unused} 127.0.0.1:{unused}\n") == errno.ENOENT
    assert write_errno(f"[::1]:{unused} [::1]:{unused}\n") == errno.ENOENT
    # one pair that matches is enough for the write to succeed
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    text = (f"127.0.0.1:{unused} 127.0.0.1:{unused}\n"
            f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}\n")
    assert write_errno(text) == 0
    assert state_of(client, server) is None
    # and a second write of the same pair finds nothing any more
    assert write_errno(f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}") == errno.ENOENT


# --- how much a write may cost ---------------------------------------------

TRACING = "/sys/kernel/tracing"


class KmallocTrace:
    """kmem:kmalloc events over `over` bytes by this process, while inside."""

    def __init__(self, over):
        self.over = over
        self.events = []

    def _put(self, name, value):
        with open(os.path.join(TRACING, name), "w") as f:
            f.write(value)

    def __enter__(self):
        if not os.path.exists(os.path.join(TRACING, "events/kmem/kmalloc")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACING], capture_output=True)
        if not os.path.exists(os.path.join(TRACING, "events/kmem/kmalloc")):
            pytest.skip("no tracefs with the kmem:kmalloc event in this guest")
        self._put("tracing_on", "0")
        self._put("trace", "")
        self._put("set_event_pid", str(os.getpid()))
        self._put("events/kmem/kmalloc/filter", f"bytes_req > {self.over}")
        self._put("events/kmem/kmalloc/enable", "1")
        self._put("tracing_on", "1")
        return self

    def __exit__(self, *exc):
        self._put("tracing_on", "0")
        self._put("events/kmem/kmalloc/enable", "0")
        self._put("events/kmem/kmalloc/filter", "0")
        self._put("set_event_pid", "")
        with open(os.path.join(TRACING, "trace")) as f:
            self.events = [l for l in f if "kmalloc:" in l]
        self._put("trace", "")


def test_oversized_write_bounded(drop_module):
    client, server = make_time_wait(socket.AF_INET, "127.0.0.1")
    pair = f"{fmt(client, socket.AF_INET)} {fmt(server, socket.AF_INET)}"
    # more than the limit: refused whole, nothing dropped
    assert write_errno(pair + " " * DROP_MAX_WRITE) == errno.E2BIG
    assert state_of(client, server) == "TIME_WAIT"
    # a write at the limit works, and is read through a small buffer: no
    # allocation of more than a page for it (a copy of the whole write
    # would be an order-7 allocation)
    with KmallocTrace(over=4096) as trace:
        assert write_errno(pair + " " * (DROP_MAX_WRITE - len(pair))) == 0
    assert state_of(client, server) is None
    assert not trace.events, "large allocations for one write:\n" + "".join(trace.events[:5])


def test_endpoint_length_bounded(drop_module):
    """The longest address netstat prints passes (with room to spare); an
    endpoint longer than the limit fails however it ends."""
    longest = "[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535"
    def padded(n):  # the same endpoint, n bytes long (zeros before the port)
        return longest.replace(":65535", ":" + "0" * (n - len(longest)) + "65535")
    assert len(padded(DROP_MAX_TOKEN)) == DROP_MAX_TOKEN
    assert write_errno(f"{longest} {longest}") == errno.ENOENT  # parsed, no such socket
    assert write_errno(f"{padded(DROP_MAX_TOKEN)} {longest}") == errno.ENOENT
    assert write_errno(f"{padded(DROP_MAX_TOKEN + 1)} {longest}") == errno.EINVAL


README_PORTS = (40000, 40002)


def bind_readme_port(c, host, port):
    """Binds the client port README names. A connection of this test's own
    earlier run may still hold it in TIME-WAIT: wait for that, bounded by
    the TIME-WAIT length (60 s), rather than fail on EADDRINUSE."""
    deadline = time.monotonic() + 65
    while True:
        try:
            c.bind((host, port))
            return
        except OSError as e:
            if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_readme_ports_are_not_ephemeral():
    """The guest reserves README's client ports (scripts/vm-guest), so an
    earlier test's outgoing connection never takes one of them."""
    with open("/proc/sys/net/ipv4/ip_local_reserved_ports") as f:
        reserved = set()
        for part in f.read().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                reserved.update(range(int(lo), int(hi or lo) + 1))
    assert set(README_PORTS) <= reserved


def test_readme_commands():
    """README's drop_tcp_socket.ko lines, run exactly as written from the
    top of the tree, on the two connections they name (127.0.0.1:40000 to
    127.0.0.1:8081, [::1]:40002 to [::1]:8081, made here): the module
    loads and the one write aborts both."""
    insmod, write = readme_commands("## drop_tcp_socket.ko", 2)
    assert not module_loaded("drop_tcp_socket")
    socks = []
    try:
        conns = []
        for family, host, cport in ((socket.AF_INET, "127.0.0.1", README_PORTS[0]),
                                    (socket.AF_INET6, "::1", README_PORTS[1])):
            srv = socket.create_server((host, 8081), family=family)
            c = socket.socket(family, socket.SOCK_STREAM)
            socks += [srv, c]
            c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            bind_readme_port(c, host, cport)
            c.connect((host, 8081))
            socks.append(srv.accept()[0])
            local, remote = c.getsockname()[:2], c.getpeername()[:2]
            assert state_of(local, remote) == "ESTABLISHED"
            conns.append((c, local, remote))
        run(["bash", "-c", insmod], cwd=ROOT)
        try:
            run(["bash", "-c", write], cwd=ROOT)
            for c, local, remote in conns:
                assert_aborted(c, local, remote)
        finally:
            run(["rmmod", "drop_tcp_socket"])
    finally:
        for sock in socks:
            sock.close()
