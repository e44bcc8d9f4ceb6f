"""khttpd over kernel TLS, kernel-only (inside the VM, KTCP_ENGINES=kernel).

A TLS agent hands khttpd a connected socket on which it finished the
handshake and turned kTLS on (TLS_TX and TLS_RX) by writing the descriptor's
number to /proc/net/khttpd_adopt. The kernel side needs no handshake to be
tested: the test connects a pair of sockets over 127.0.0.1 through a
listener of its own, installs the tls ULP on both ends with fixed AES-GCM-128
keys (one end's TX key is the other's RX key), hands the accepted end to
khttpd, closes its own descriptor, and speaks HTTP on the other end, where
kTLS makes and opens the records. scripts/vm fails the run on any
BUG/WARNING/Oops in the guest's dmesg.
"""
import errno
import os
import signal
import socket
import ssl
import struct
import subprocess
import time

import pytest

from testlib import BUILD, free_port, module_path, require_kind, run, tls_stat, wait_port

KHTTPD_KO = module_path("khttpd")
TLSD = os.path.join(BUILD, "ktcp-tlsd")
ADOPT = "/proc/net/khttpd_adopt"
BIG = 8 * 1024 * 1024

SOL_TLS = 282
TCP_ULP = 31
TLS_TX, TLS_RX = 1, 2
TLS_SET_RECORD_TYPE, TLS_GET_RECORD_TYPE = 1, 2
TLS_1_3_VERSION = 0x0304
TLS_CIPHER_AES_GCM_128 = 51
ALERT, HANDSHAKE, APPLICATION_DATA = 21, 22, 23
# A TLS 1.3 KeyUpdate handshake message (type 24, length 1), update_requested
KEY_UPDATE = bytes([24, 0, 0, 1, 1])


def crypto_info(key, iv, salt, seq=0):
    """struct tls12_crypto_info_aes_gcm_128 (linux/tls.h)."""
    return struct.pack("<HH8s16s4s8s", TLS_1_3_VERSION, TLS_CIPHER_AES_GCM_128,
                       iv, key, salt, seq.to_bytes(8, "big"))


# One key per direction, fixed: the test owns both ends.
C2S = crypto_info(bytes(range(16)), b"\x01" * 8, b"\x02" * 4)
S2C = crypto_info(bytes(range(16, 32)), b"\x03" * 8, b"\x04" * 4)


def ktls(s, tx, rx):
    s.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
    if tx:
        s.setsockopt(SOL_TLS, TLS_TX, tx)
    if rx:
        s.setsockopt(SOL_TLS, TLS_RX, rx)


def tcp_pair():
    """(client, server end) of a connection over 127.0.0.1."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        cli = socket.create_connection(lst.getsockname(), timeout=20)
        srv, _ = lst.accept()
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return cli, srv


def ktls_pair(server_tx=True, server_rx=True):
    cli, srv = tcp_pair()
    ktls(cli, C2S, S2C)
    ktls(srv, S2C if server_tx else None, C2S if server_rx else None)
    return cli, srv


def adopt(fd):
    """Write fd's number to the hand-off file: 0 or the errno."""
    try:
        with open(ADOPT, "w") as f:
            f.write(str(fd))
    except OSError as e:
        return e.errno
    return 0


class Client:
    """HTTP on the client end: kTLS makes and opens the records."""

    def __init__(self, sock):
        self.s = sock
        # A bytearray: appending to bytes copies all of it each time,
        # which over an 8 MiB body costs seconds.
        self.buf = bytearray()
        self.closed_by = None  # "alert" or "eof"

    def send(self, data):
        self.s.sendall(data)

    def alert(self, desc=40):
        """A fatal alert record (handshake_failure by default)."""
        self.record(ALERT, bytes([2, desc]))

    def record(self, kind, payload):
        """One record of type kind (kTLS seals it)."""
        self.s.sendmsg([payload], [(SOL_TLS, TLS_SET_RECORD_TYPE, bytes([kind]))])

    def _more(self):
        if isinstance(self.s, ssl.SSLSocket):  # OpenSSL makes the records
            data = self.s.recv(1 << 20)
            self.closed_by = None if data else "eof"
            self.buf += data
            return bool(data)
        data, anc, _, _ = self.s.recvmsg(1 << 20, socket.CMSG_SPACE(1))
        for level, kind, value in anc:
            if level == SOL_TLS and kind == TLS_GET_RECORD_TYPE and value[0] != APPLICATION_DATA:
                self.closed_by = "alert"
                return False
        if not data:
            self.closed_by = "eof"
            return False
        self.buf += data
        return True

    def response(self):
        """(status, headers, body) of one Content-Length response."""
        while b"\r\n\r\n" not in self.buf:
            assert self._more(), f"closed ({self.closed_by}) before a head: {self.buf!r}"
        end = self.buf.index(b"\r\n\r\n")
        head = bytes(self.buf[:end])
        del self.buf[:end + 4]
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = int(hdrs["content-length"])
        while len(self.buf) < n:
            assert self._more(), f"closed ({self.closed_by}) after {len(self.buf)} of {n} bytes"
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return status, hdrs, body

    def until_closed(self):
        """Everything up to the peer's close_notify or EOF."""
        while self._more():
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def get(self, path, extra=""):
        self.send(f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode())
        return self.response()


def stats():
    out = {}
    with open("/proc/net/khttpd") as f:
        for line in f:
            k, v = line.split()
            out[k] = int(v)
    return out


def module_loaded(name):
    with open("/proc/modules") as f:
        return any(line.split()[0] == name for line in f)


@pytest.fixture(scope="module")
def docroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    root.chmod(0o755)  # khttpd reads as nobody
    (root / "hello.txt").write_bytes(b"hello, tls\n")
    (root / "big.bin").write_bytes(os.urandom(BIG))
    sub = root / "dir"
    sub.mkdir()
    sub.chmod(0o755)
    for name in ("alpha.txt", "beta.txt"):
        (sub / name).write_bytes(name.encode())
    for p in root.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    return root


@pytest.fixture(params=["unbound"])
def khttpd(request, docroot):
    require_kind("kernel")
    if not os.path.exists(KHTTPD_KO):
        pytest.fail(f"{KHTTPD_KO} is not built (run make modules)")
    run(["modprobe", "tls"])
    port = free_port()
    run(["insmod", KHTTPD_KO, f"root={docroot}", f"port={port}", f"mode={request.param}"])
    wait_port(port)
    # wait_port's probe connection: counted and gone before a test looks.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = stats()
        if st["accepted"] >= 1 and st["active"] == 0:
            break
        time.sleep(0.02)
    yield docroot
    if module_loaded("khttpd"):
        run(["rmmod", "khttpd"], timeout=60)


def adopted_client():
    """A kTLS connection khttpd serves; the test's server end is closed."""
    cli, srv = ktls_pair()
    assert adopt(srv.fileno()) == 0
    srv.close()  # the agent's descriptor: khttpd holds its own reference
    return Client(cli)


def test_get_keepalive_big_file_and_counters(khttpd):
    before, tls_before = stats(), tls_stat()
    c = adopted_client()
    assert stats()["tls_adopted"] == before["tls_adopted"] + 1
    status, _, body = c.get("/hello.txt")
    assert (status, body) == (200, b"hello, tls\n")
    # Same connection: keep-alive, then the big file through the page path.
    status, hdrs, body = c.get("/big.bin")
    assert status == 200 and int(hdrs["content-length"]) == BIG
    assert body == (khttpd / "big.bin").read_bytes()
    status, _, _ = c.get("/missing")
    assert status == 404
    c.s.close()
    after, tls_after = stats(), tls_stat()
    assert after["requests"] == before["requests"] + 3
    assert after["bytes_out"] - before["bytes_out"] > BIG
    # Records were made and opened in software by kTLS.
    assert tls_after["TlsTxSw"] > tls_before["TlsTxSw"]
    assert tls_after["TlsRxSw"] > tls_before["TlsRxSw"]


def gcm_aes_driver():
    """The gcm(aes) implementation the kernel picks: the highest priority."""
    best = (-1, None)
    for blk in open("/proc/crypto").read().split("\n\n"):
        f = dict(line.split(":", 1) for line in blk.splitlines() if ":" in line)
        f = {k.strip(): v.strip() for k, v in f.items()}
        if f.get("name") == "gcm(aes)":
            best = max(best, (int(f["priority"]), f["driver"]))
    return best[1]


def test_ktls_records_use_the_cpus_aes():
    """kTLS opens and makes records with the CPU's AES-GCM, not the
    generic C cipher: the guest loads the crypto drivers the CPU's
    modalias names, as udev does at a machine's boot (scripts/vm-guest).
    Without them every kTLS figure measured the table-driven C AES."""
    require_kind("kernel")
    flags = open("/proc/cpuinfo").read().split("\nflags", 1)[1].split("\n", 1)[0]
    if " aes" not in flags or " pclmulqdq" not in flags:
        pytest.skip("this CPU has no AES-NI and CLMUL")
    run(["modprobe", "tls"])
    cli, srv = ktls_pair()
    cli.close()
    srv.close()
    driver = gcm_aes_driver()
    # The AES-NI one is "generic-gcm-aesni" (-avx...); the C one is built
    # from the template, "gcm_base(ctr(aes-generic),ghash-...)".
    assert driver and "aesni" in driver and "aes-generic" not in driver, driver


def test_pipelined_requests_answered_in_order(khttpd):
    c = adopted_client()
    c.send(b"".join(f"GET /{p} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
                    for p in ("hello.txt", "dir/alpha.txt", "nope", "big.bin", "hello.txt")))
    got = [c.response() for _ in range(5)]
    assert [g[0] for g in got] == [200, 200, 404, 200, 200]
    assert got[1][2] == b"alpha.txt"
    assert got[3][2] == (khttpd / "big.bin").read_bytes()
    assert got[4][2] == b"hello, tls\n"


@pytest.mark.parametrize("khttpd", ["unbound", "bound", "kthread"], indirect=True)
def test_many_pipelined_requests_across_records(khttpd):
    """200 requests in one write: kTLS makes 16 KiB records, more than the
    request buffer's first 4 KiB, so khttpd reads records in parts and must
    see the rest kTLS holds decrypted (off the TCP queue); then one head
    split over three records with pauses between them."""
    c = adopted_client()
    paths = ["hello.txt", "dir/alpha.txt", "nope"] * 66 + ["hello.txt", "dir/beta.txt"]

    def request(p, size=128):
        # Every request 128 bytes: the 4 KiB buffer ends on a request's
        # end, with the rest of the record in kTLS and none on TCP's queue.
        base, tail = f"GET /{p} HTTP/1.1\r\nHost: t\r\nX-Pad: ", "\r\n\r\n"
        return (base + "p" * (size - len(base) - len(tail)) + tail).encode()

    c.send(b"".join(request(p) for p in paths))
    for p in paths:
        status, _, body = c.response()
        if p == "nope":
            assert status == 404
        else:
            assert status == 200 and body == (khttpd / p).read_bytes(), p
    for piece in (b"GET /dir/be", b"ta.txt HTTP/1.1\r\nHo", b"st: t\r\n\r\n"):
        c.send(piece)
        time.sleep(0.2)
    assert c.response()[:3:2] == (200, b"beta.txt")


def test_listing_and_close_notify(khttpd):
    c = adopted_client()
    # HTTP/1.0: the listing ends with the connection, which khttpd closes
    # with a close_notify after the last record.
    c.send(b"GET /dir/ HTTP/1.0\r\n\r\n")
    out = c.until_closed()
    assert out.startswith(b"HTTP/1.1 200"), out[:200]
    assert b"alpha.txt" in out and b"beta.txt" in out
    assert c.closed_by == "alert"  # close_notify, not a bare FIN


def test_connection_close_response_complete(khttpd):
    c = adopted_client()
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    status, _, body = c.response()
    assert status == 200 and body == (khttpd / "big.bin").read_bytes()
    assert c.until_closed() == b""
    assert c.closed_by == "alert"


@pytest.mark.parametrize("record", ["alert", "key_update"])
def test_alert_ends_connection_and_is_counted(khttpd, record):
    """A record that is not application data mid keep-alive ends the
    connection, counted in tls_nondata, not an error: an alert, or a TLS 1.3
    KeyUpdate, which kTLS on 6.1 and 6.12 cannot act on (it has no way to
    take new receive keys): khttpd could not read what the client seals
    next, so it closes, with no byte more sent and no hang."""
    before = stats()
    c = adopted_client()
    assert c.get("/hello.txt")[0] == 200
    if record == "alert":
        c.alert()
    else:
        c.record(HANDSHAKE, KEY_UPDATE)
    c.s.settimeout(10)
    assert c.until_closed() == b""
    assert c.closed_by == "eof"
    deadline = time.monotonic() + 10
    while stats()["active"] != before["active"] and time.monotonic() < deadline:
        time.sleep(0.05)
    after = stats()
    assert after["tls_nondata"] == before["tls_nondata"] + 1
    assert after["active"] == before["active"]
    assert after["errors"] == before["errors"]


REFUSAL_HELPER = r"""
import os, socket, sys
fd = int(sys.argv[1])
try:
    with open("/proc/net/khttpd_adopt", "w") as f:
        f.write(str(fd))
except OSError as e:
    print(e.errno)
else:
    print(0)
"""


def test_refusals_adopt_nothing(khttpd):
    before = stats()
    keep = []

    # No kTLS at all: a plain established socket.
    cli, srv = tcp_pair()
    keep += [cli, srv]
    assert adopt(srv.fileno()) == errno.EINVAL
    # The tls ULP with only one direction keyed.
    cli, srv = ktls_pair(server_rx=False)
    keep += [cli, srv]
    assert adopt(srv.fileno()) == errno.EINVAL
    # A listening socket, a UDP socket, a pipe, a closed descriptor, junk.
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect(("127.0.0.1", 9))
    r, w = os.pipe()
    keep += [lst, udp]
    assert adopt(lst.fileno()) == errno.EINVAL
    assert adopt(udp.fileno()) == errno.EINVAL
    assert adopt(r) == errno.EINVAL
    os.close(r)
    os.close(w)
    # A descriptor closed by the time it is named (the hand-off file is
    # opened first, so it does not take the number).
    af = os.open(ADOPT, os.O_WRONLY)
    gone = socket.socket()
    n = gone.fileno()
    gone.close()
    with pytest.raises(OSError) as e:
        os.write(af, str(n).encode())
    os.close(af)
    assert e.value.errno == errno.EBADF
    fd = os.open(ADOPT, os.O_WRONLY)
    with pytest.raises(OSError) as e:
        os.write(fd, b"twelve")
    os.close(fd)
    assert e.value.errno == errno.EINVAL

    # A good kTLS socket, but the writer lacks CAP_NET_ADMIN (root
    # without it, and nobody, who may not even open the file).
    cli, srv = ktls_pair()
    keep += [cli, srv]
    for prefix in (["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin"],
                   ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]):
        r = subprocess.run(prefix + ["/usr/bin/python3", "-c", REFUSAL_HELPER, str(srv.fileno())],
                           pass_fds=[srv.fileno()], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert int(r.stdout) in (errno.EPERM, errno.EACCES), (prefix, r.stdout)
    # Confused deputy: the file opened without CAP_NET_ADMIN, written by
    # a process that has it.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    keep += [a, b]
    opener = ("import os, socket; fd = os.open('/proc/net/khttpd_adopt', os.O_WRONLY); "
              "socket.send_fds(socket.socket(fileno=%d), [b'x'], [fd])" % b.fileno())
    subprocess.run(["setpriv", "--inh-caps=-net_admin", "--bounding-set=-net_admin",
                    "/usr/bin/python3", "-c", opener], pass_fds=[b.fileno()], check=True, timeout=30)
    _, fds, _, _ = socket.recv_fds(a, 16, 1)
    with pytest.raises(PermissionError):
        os.write(fds[0], str(srv.fileno()).encode())
    os.close(fds[0])

    after = stats()
    for k in ("tls_adopted", "accepted", "active", "refused", "errors", "requests"):
        assert after[k] == before[k], k
    # The same socket is still the agent's and is taken when asked right.
    assert adopt(srv.fileno()) == 0
    srv.close()
    assert Client(cli).get("/hello.txt")[0] == 200
    # Once adopted, a second hand-off of the same socket is refused.
    for s in keep:
        s.close()


def test_double_adoption_refused(khttpd):
    cli, srv = ktls_pair()
    assert adopt(srv.fileno()) == 0
    assert adopt(srv.fileno()) == errno.EBUSY
    srv.close()
    assert Client(cli).get("/hello.txt")[0] == 200
    cli.close()


def test_rmmod_with_live_adopted_connections(khttpd):
    idle = adopted_client()
    assert idle.get("/hello.txt")[0] == 200
    # One mid-way through the big file, its reader stopped.
    busy = adopted_client()
    busy.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
    fresh = adopted_client()  # nothing asked yet
    time.sleep(0.3)
    t0 = time.monotonic()
    run(["rmmod", "khttpd"], timeout=60)
    assert time.monotonic() - t0 < 20
    assert module_loaded("tls")
    for c in (idle, busy, fresh):
        c.s.settimeout(10)
        try:
            c.until_closed()
        except (ConnectionResetError, OSError):
            pass  # reset, or EIO from a cut record: closed either way
        c.s.close()


# ---- end to end: ktcp-tlsd does the handshake, khttpd the rest ----

@pytest.fixture
def test_ca(tmp_path):
    """A CA and a server certificate for 127.0.0.1, made now, kept nowhere."""
    d = tmp_path
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run(["openssl", "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem",
         "-days", "1", "-subj", "/CN=ktcp test CA"])
    run(["openssl", "req", *ec, "-keyout", d / "srv.key", "-out", d / "srv.csr",
         "-subj", "/CN=127.0.0.1"])
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run(["openssl", "x509", "-req", "-in", d / "srv.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
         "-CAcreateserial", "-days", "1", "-extfile", d / "ext", "-out", d / "srv.pem"])
    return d


class Tlsd:
    def __init__(self, ca, port=None, args=()):
        if not os.path.exists(TLSD):
            pytest.fail(f"{TLSD} is not built (run make user)")
        self.port = port or free_port()
        self.p = subprocess.Popen([TLSD, "--port", str(self.port), "--bind", "127.0.0.1",
                                   "--cert", str(ca / "srv.pem"), "--key", str(ca / "srv.key"),
                                   *args],
                                  stderr=subprocess.PIPE, text=True)
        wait_port(self.port, proc=self.p)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        _, err = self.p.communicate(timeout=30)
        assert self.p.returncode == 0, err
        return err


def test_curl_through_tlsd(khttpd, test_ca, tmp_path):
    before, tls_before = stats(), tls_stat()
    agent = Tlsd(test_ca)
    try:
        url = f"https://127.0.0.1:{agent.port}"
        # Two files on one connection (keep-alive), checked against the CA.
        run(["curl", "-sS", "--fail", "--cacert", str(test_ca / "ca.pem"),
             f"{url}/hello.txt", "-o", str(tmp_path / "a"), f"{url}/big.bin", "-o", str(tmp_path / "b")],
            timeout=120)
        assert (tmp_path / "a").read_bytes() == b"hello, tls\n"
        assert (tmp_path / "b").read_bytes() == (khttpd / "big.bin").read_bytes()
        # A client that does not trust the CA never gets a response.
        r = run(["curl", "-sS", f"{url}/hello.txt"], check=False, timeout=60)
        assert r.returncode != 0
    finally:
        log = agent.stop()
    after, tls_after = stats(), tls_stat()
    assert after["tls_adopted"] == before["tls_adopted"] + 1, log
    assert after["requests"] == before["requests"] + 2
    assert tls_after["TlsTxSw"] > tls_before["TlsTxSw"]
    assert tls_after["TlsRxSw"] > tls_before["TlsRxSw"]
    assert "1 adopted" in log, log


def test_agent_restart_keeps_served_connections(khttpd, test_ca):
    agent = Tlsd(test_ca)
    ctx = ssl.create_default_context(cafile=str(test_ca / "ca.pem"))
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", agent.port), timeout=20),
                        server_hostname="127.0.0.1")
    c = Client(s)
    assert c.get("/hello.txt")[:3:2] == (200, b"hello, tls\n")
    agent.stop()  # the agent exits: the connection is khttpd's
    status, _, body = c.get("/big.bin")
    assert status == 200 and body == (khttpd / "big.bin").read_bytes()
    agent = Tlsd(test_ca, port=agent.port)  # and comes back
    try:
        s2 = ctx.wrap_socket(socket.create_connection(("127.0.0.1", agent.port), timeout=20),
                             server_hostname="127.0.0.1")
        assert Client(s2).get("/hello.txt")[0] == 200
        assert c.get("/hello.txt")[0] == 200
        s2.close()
    finally:
        agent.stop()
    s.close()


def s_client(port, ca, *args, data=b"GET /hello.txt HTTP/1.0\r\n\r\n"):
    return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                           "-CAfile", str(ca / "ca.pem"), "-verify_return_error", "-ign_eof",
                           *args], input=data, capture_output=True, timeout=60)


def test_tlsd_versions_and_resumption(khttpd, test_ca, tmp_path):
    """The agent's sessions are TLS 1.2 (its default ceiling: OpenSSL 3.0
    puts a TLS 1.3 session's receive keys in no kernel), resumed from a
    ticket of the agent's TLS layer and still handed to khttpd; a client
    that speaks TLS 1.3 only is refused and nothing is adopted."""
    before = stats()
    agent = Tlsd(test_ca)
    sess = tmp_path / "sess"
    try:
        full = s_client(agent.port, test_ca, "-sess_out", str(sess))
        assert b"hello, tls" in full.stdout, full.stderr[-2000:]
        assert b"Protocol  : TLSv1.2" in full.stdout
        again = s_client(agent.port, test_ca, "-sess_in", str(sess))
        assert b"Reused, TLSv1.2" in again.stdout, again.stdout[-2000:]
        assert b"hello, tls" in again.stdout
        only13 = s_client(agent.port, test_ca, "-tls1_3")
        assert b"hello, tls" not in only13.stdout
    finally:
        log = agent.stop()
    assert stats()["tls_adopted"] == before["tls_adopted"] + 2, log
    # failed: the TLS 1.3 client, and the probe connection of wait_port
    assert "2 adopted, 2 failed" in log, log


def test_tlsd_handshake_deadline_is_for_the_whole_handshake(khttpd, test_ca):
    """--handshake-timeout-ms bounds a handshake from its accept, not each
    read: a client that sends its ClientHello one byte every 200 ms is
    closed after about a second, while it still trickles."""
    agent = Tlsd(test_ca, args=["--handshake-timeout-ms", "1000"])
    try:
        s = socket.create_connection(("127.0.0.1", agent.port), timeout=10)
        t0 = time.monotonic()
        closed = None
        hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(200)
        for b in hello:  # 211 bytes: 42 s if never cut
            try:
                s.send(bytes([b]))
            except OSError:
                closed = time.monotonic() - t0
                break
            s.settimeout(0.2)
            try:
                if s.recv(100) == b"":
                    closed = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                closed = time.monotonic() - t0
                break
        s.close()
        assert closed is not None and 0.9 <= closed < 3, closed
    finally:
        log = agent.stop()
    assert "0 adopted, 2 failed" in log, log  # and wait_port's probe
