"""HTTPS on ktcp-httpd (--tls-port, user/tls, docs/tls.md), in each model:
real clients (curl, openssl s_client, Python's ssl), what is refused (TLS
1.0 and 1.1, non-AEAD suites, garbage, a truncated ClientHello, plain HTTP),
stalled handshakes closed by their timeout while others are served, session
resumption, a certificate reload under load, the counters, and kTLS where
the kernel has the tls ULP (the VM; the host has none). The whole
conformance suite also runs over TLS (the user-*-tls engines of
conftest.py); this file holds what only TLS has."""
import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

from engines import HTTPD_MODELS, UserHttpd, free_port, in_vm, raise_nofile, tlscert
from rawhttp import Conn, get
from sclient import SClient
from testlib import httpd_refuses, require_kind, strace_counts, tls_stat

OPENSSL_TIMEOUT = 20


@pytest.fixture(scope="module", params=HTTPD_MODELS)
def https(request, docroot, tmp_path_factory):
    """ktcp-httpd in one model serving HTTPS on .port, plain on .plain_port,
    with its counters at /st and an access log."""
    require_kind("user")
    d = str(tmp_path_factory.mktemp(f"https-{request.param}"))
    e = UserHttpd(request.param, d, tls=True)
    e.start(docroot.root, status_path="/st", access_log=os.path.join(d, "access.log"))
    try:
        yield e
    finally:
        e.stop()


def s_client(port, *args, data=b"", timeout=OPENSSL_TIMEOUT):
    """openssl s_client to the engine on port; (returncode, stdout+stderr)."""
    ca = tlscert.TLS_PORTS.get(port) or tlscert.make_ca()["ca"]
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                        "-servername", "localhost", "-CAfile", ca, *args],
                       input=data, capture_output=True, timeout=timeout)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def tls_get(port, path="/a.txt", ctx=None, **wrap):
    """One HTTPS GET with Python's ssl: (status, body, the TLS socket's
    version, cipher, ALPN, session, reused)."""
    ctx = ctx or tlscert.context_for(port)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", **wrap) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            return (status, body, s.version(), s.cipher()[0], s.selected_alpn_protocol(),
                    s.session, s.session_reused)


def failures(e):
    return e.counters()["tls_handshake_failures"]


def test_curl_fetches_over_https_with_alpn_http11(https, docroot):
    r = subprocess.run(["curl", "-sS", "-v", "--cacert", tlscert.TLS_PORTS[https.port],
                        f"https://localhost:{https.port}/large.bin"],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == docroot.read("large.bin")  # a file body: sendfile's path
    err = r.stderr.decode(errors="replace")
    assert "ALPN: server accepted http/1.1" in err, err[-2000:]
    assert re.search(r"SSL connection using TLSv1\.3 / TLS_(AES|CHACHA20)", err), err[-2000:]


def test_openssl_s_client_tls13_alpn(https):
    rc, out = s_client(https.port, "-alpn", "h2,http/1.1", "-tls1_3", "-ign_eof",
                       data=b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert rc == 0, out[-2000:]
    assert "ALPN protocol: http/1.1" in out, out[-2000:]
    assert "New, TLSv1.3, Cipher is TLS_" in out, out[-2000:]
    assert "Verify return code: 0 (ok)" in out
    assert "\r\n\r\nhello\n" in out


def test_tls13_key_update_mid_keep_alive(https):
    """A client's TLS 1.3 KeyUpdate between requests of one keep-alive
    connection (openssl s_client's k, then K: update_requested, so the
    server must update its sending keys too): OpenSSL writes and reads
    the records here, takes the client's new keys and sends its own, and
    every response comes, whole and in order. (Where the kernel writes
    the records, tests/http/test_http_ktls.py.)"""
    if has_tls_ulp():
        pytest.skip("the kernel writes the records here: test_http_ktls.py's KeyUpdate test")
    req = "GET /a.txt HTTP/1.1\nHost: x\n\n"
    with SClient(https.port, tlscert.TLS_PORTS[https.port], "-tls1_3") as c:
        c.send(req)
        assert c.wait_for("\r\n\r\nhello\n", 1), c.output[-2000:]
        for n, cmd in ((2, "k"), (3, "K"), (4, None)):
            if cmd:
                c.command(cmd)
            c.send(req)
            assert c.wait_for("\r\n\r\nhello\n", n), (cmd, c.output[-2000:])
        assert c.output.count("KEYUPDATE") == 2
        assert c.p.poll() is None, "the connection ended"


def test_python_ssl_tls12_and_tls13_aead(https):
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = tlscert.context_for(https.port)
        ctx.minimum_version = ctx.maximum_version = version
        status, body, v, cipher, alpn, _, _ = tls_get(https.port, ctx=ctx)
        assert (status, body) == (200, b"hello\n")
        assert v == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        assert "GCM" in cipher or "CHACHA20" in cipher, cipher
        assert alpn == "http/1.1"


def test_server_prefers_its_own_cipher_order(https):
    ctx = tlscert.context_for(https.port)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    # the client lists ChaCha20 first; the server's order puts AES-GCM first
    ctx.set_ciphers("ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256")
    assert tls_get(https.port, ctx=ctx)[3] == "ECDHE-ECDSA-AES128-GCM-SHA256"


@pytest.mark.parametrize("args", [
    ("-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"),
    ("-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"),
    ("-no_tls1_3", "-cipher", "AES128-SHA"),  # TLS 1.2, a CBC suite only
    ("-no_tls1_3", "-cipher", "ECDHE-ECDSA-AES128-SHA256"),
], ids=["tls1.0", "tls1.1", "cbc-only", "cbc-sha256-only"])
def test_old_versions_and_non_aead_suites_refused(https, args):
    before = failures(https)
    rc, out = s_client(https.port, *args)
    assert rc != 0, out[-2000:]
    assert "Cipher is (NONE)" in out or "alert" in out, out[-2000:]
    assert failures(https) == before + 1
    assert get(https.port, "/a.txt").status == 200  # still serving


def client_hello():
    """The bytes of a real TLS ClientHello (Python's, captured from a
    memory BIO)."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


@pytest.mark.parametrize("junk", [
    b"\x16\x03\x01\x00\x05hello" + os.urandom(64),   # a handshake record of garbage
    bytes(range(256)),                               # not TLS at all
    b"\x16\x03\x03\xff\xff" + b"\0" * 100,           # a record longer than allowed
], ids=["garbage-record", "binary", "oversized"])
def test_garbage_instead_of_client_hello_is_refused(https, junk):
    before = failures(https)
    with socket.create_connection(("127.0.0.1", https.port), timeout=5) as s:
        s.sendall(junk)
        s.settimeout(5)
        got = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
    # an alert record (21) at most, never an HTTP answer
    assert not got or got[0] == 21, got[:40]
    assert failures(https) == before + 1
    assert get(https.port, "/a.txt").status == 200


def test_truncated_client_hello_times_out(https, docroot):
    hello = client_hello()
    with https_spawned(https, docroot, tls_handshake_timeout_ms=500) as srv:
        before = failures(srv)
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(hello[:len(hello) // 2])
            t0 = time.monotonic()
            assert s.recv(4096) == b""  # closed by the handshake timeout
            took = time.monotonic() - t0
        assert 0.3 < took < 3, took
        assert failures(srv) == before + 1
        # and a truncated one the client ends itself: closed at once
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(hello[:20])
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            assert not got or got[0] == 21, got[:40]  # an alert at most
        deadline = time.monotonic() + 5
        while failures(srv) != before + 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_plain_http_to_the_tls_port_gets_400(https):
    before = failures(https)
    with socket.create_connection(("127.0.0.1", https.port), timeout=5) as s:
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), data
    assert b"Connection: close" in head
    assert b"plain HTTP request sent to the HTTPS port" in body
    assert failures(https) == before + 1


class https_spawned:
    """A second instance of the model of e, over TLS, with other options."""

    def __init__(self, e, docroot, **options):
        self.e = UserHttpd(e.model, e.logdir, tls=True)
        self.root = docroot.root
        self.options = dict(status_path="/st", **options)

    def __enter__(self):
        return self.e.start(self.root, **self.options)

    def __exit__(self, *exc):
        self.e.stop()


def test_stalled_handshakes_closed_while_others_are_served(https, docroot):
    """2,000 connections that send one byte of a handshake and stop: a
    normal client still completes within 1 s, and the stalled ones are
    closed by --tls-handshake-timeout-ms."""
    n = 2000
    raise_nofile(n + 512)
    with https_spawned(https, docroot, tls_handshake_timeout_ms=3000,
                       nofile="max", max_conns=0) as srv:
        stalled = []
        try:
            for _ in range(n):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(b"\x16")
                stalled.append(s)
            t_stalled = time.monotonic()
            # the best of up to three tries: a loaded shared host can hold
            # any one client back, never all three for the stalled ones
            took = []
            for _ in range(3):
                t0 = time.monotonic()
                status, body = tls_get(srv.port)[:2]
                took.append(time.monotonic() - t0)
                assert (status, body) == (200, b"hello\n")
                if took[-1] < 1.0:
                    break
            assert min(took) < 1.0, f"a normal client took {took} s beside {n} stalled"
            # every stalled one closed by the timeout (3 s), none much later
            for s in stalled:
                left = max(0.1, t_stalled + 3 + 10 - time.monotonic())
                s.settimeout(left)
                try:
                    assert s.recv(1) == b""
                except ConnectionResetError:
                    pass
            assert time.monotonic() - t_stalled < 13
        finally:
            for s in stalled:
                s.close()
        c = srv.counters()
        assert c["tls_handshake_failures"] >= n
        assert c["timeouts"] >= n


def test_session_resumption(https):
    # TLS 1.3 with Python's ssl: the ticket comes after the handshake
    ctx = tlscert.context_for(https.port)
    status, _, v, _, _, session, reused = tls_get(https.port, ctx=ctx)
    assert v == "TLSv1.3" and not reused and session is not None
    assert tls_get(https.port, ctx=ctx, session=session)[6], "TLS 1.3 ticket not taken"
    # openssl s_client -sess_out / -sess_in, TLS 1.2 and 1.3
    for version in ("-tls1_2", "-tls1_3"):
        sess = os.path.join(https.logdir, f"sess{version}.pem")
        req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        rc, out = s_client(https.port, version, "-ign_eof", "-sess_out", sess, data=req)
        assert rc == 0 and "New, TLSv1." in out, out[-2000:]
        rc, out = s_client(https.port, version, "-ign_eof", "-sess_in", sess, data=req)
        assert rc == 0 and "Reused, TLSv1." in out, out[-2000:]


def cert_fingerprint(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with tlscert.context_for(port).wrap_socket(raw, server_hostname="localhost") as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def test_certificate_reload_under_load_loses_no_request(https, docroot, tmp_path):
    """SIGHUP loads the certificate and key again while clients keep
    fetching (new connections and keep-alive ones): no request fails, new
    handshakes get the new certificate, and a pair that does not match
    keeps the running one."""
    first = tlscert.make_ca(str(tmp_path), "first")
    second = tlscert.make_ca(str(tmp_path), "second")
    cert, key = tmp_path / "live.pem", tmp_path / "live.key"
    cert.write_bytes(open(first["cert"], "rb").read())
    key.write_bytes(open(first["key"], "rb").read())
    e = UserHttpd(https.model, str(tmp_path), tls=True)
    e.certs = None
    port, plain = free_port(), free_port()
    # the engine's own certificate would be a different CA: start by hand
    e.tls = False
    args = ["--tls-port", str(port), "--tls-cert", str(cert), "--tls-key", str(key)]
    # SIGHUP reads the files as the serving account: root here (the
    # test's folder is root's own; docs/tls.md says how to place them)
    e.start(docroot.root, port=plain, args=args, status_path="/st", user="root")
    tlscert.TLS_PORTS[port] = first["ca"]  # both were signed by one CA
    try:
        before = cert_fingerprint(port)
        stop = threading.Event()
        errors, done = [], [0]

        def load(keepalive):
            try:
                while not stop.is_set():
                    if keepalive:
                        with Conn(port) as c:
                            for _ in range(20):
                                c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
                                r = c.read_response()
                                assert r.status == 200 and r.body == b"hello\n"
                                done[0] += 1
                    else:
                        assert tls_get(port)[:2] == (200, b"hello\n")
                        done[0] += 1
            except Exception as ex:  # reported below
                errors.append(repr(ex))

        threads = [threading.Thread(target=load, args=(k,)) for k in (True, True, False, False)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        for pair in (second, first, second):
            cert.write_bytes(open(pair["cert"], "rb").read())
            key.write_bytes(open(pair["key"], "rb").read())
            e.signal(signal.SIGHUP)
            time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors[:3]
        assert done[0] > 50, done
        after = cert_fingerprint(port)
        assert after != before
        assert e.log_text().count("TLS certificate") >= 3
        # a key that does not match: the running pair stays
        key.write_bytes(open(first["key"], "rb").read())
        e.signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while "kept the certificate and key loaded before" not in e.log_text():
            assert time.monotonic() < deadline, e.log_text()[-2000:]
            time.sleep(0.05)
        assert "does not match" in e.log_text() or "mismatch" in e.log_text()
        assert cert_fingerprint(port) == after
    finally:
        tlscert.TLS_PORTS.pop(port, None)
        e.stop()


def has_tls_ulp():
    s = socket.socket()
    try:
        s.setsockopt(socket.IPPROTO_TCP, 31, b"tls")  # TCP_ULP
        return True
    except OSError as ex:
        return ex.errno not in (2, 92)  # ENOENT, ENOPROTOOPT
    finally:
        s.close()


def test_counters_start_line_access_log_and_ktls(https, docroot):
    c0 = https.counters()
    stat0 = tls_stat()
    status, body = tls_get(https.port, "/large.bin")[:2]
    assert status == 200 and body == docroot.read("large.bin")
    assert get(https.port, "/a.txt").status == 200
    c1 = https.counters()
    assert c1["tls_handshakes"] >= c0["tls_handshakes"] + 2
    log = https.log_text()
    ulp = has_tls_ulp()
    if ulp:
        assert "kernel TLS (kTLS) TX and RX" in log
        # the kernel writes the records: SSL_sendfile's zero copy
        assert c1["tls_ktls_tx"] >= c0["tls_ktls_tx"] + 2, (c0, c1)
        stat1 = tls_stat()
        assert stat1.get("TlsTxSw", 0) + stat1.get("TlsTxDevice", 0) >= \
            stat0.get("TlsTxSw", 0) + stat0.get("TlsTxDevice", 0) + 2, (stat0, stat1)
        print(f"kTLS: counters {c1}, /proc/net/tls_stat {stat1}")
    else:
        assert "records written by OpenSSL: this kernel has no tls ULP" in log
        assert c1["tls_ktls_tx"] == 0 and c1["tls_ktls_rx"] == 0
    # the status page answers on both ports, with the TLS counters
    r = get(https.plain_port, "/st")
    assert r.status == 200 and b"tls_handshakes " in r.body
    status, body = tls_get(https.port, "/st/metrics")[:2]
    assert status == 200 and b"ktcp_httpd_tls_handshakes_total " in body
    # one access log for both ports (each worker gathers its lines and
    # writes them out once a second: the two requests, served by different
    # workers, reach the file in either order)
    want = ('"GET /large.bin HTTP/1.1" 200', '"GET /a.txt HTTP/1.1" 200')
    deadline = time.monotonic() + 10
    while True:
        with open(https.opts["access_log"]) as f:
            lines = f.read()
        if all(w in lines for w in want) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert want[0] in lines, lines
    assert want[1] in lines, lines


@pytest.mark.skipif(not in_vm(), reason="kTLS is exercised in the VM (the host has no tls ULP)")
def test_ktls_on_in_the_vm(https):
    assert has_tls_ulp(), "the guest kernel has CONFIG_TLS: the ULP must load"
    c = https.counters()
    tls_get(https.port)
    assert https.counters()["tls_ktls_tx"] >= c["tls_ktls_tx"] + 1


def test_records_of_a_file_chunk_leave_in_one_send(https, docroot):
    """Where OpenSSL makes the records (no kTLS: this host), the four
    records of a 64 KiB chunk of a file go to the socket in one send, not
    one each: a 1 MiB body is 16 sends (and fewer, larger segments for the
    client to take), where it was 64."""
    if has_tls_ulp():
        pytest.skip("the kernel writes the records here (kTLS)")
    if not shutil.which("strace"):
        pytest.skip("strace not installed (scripts/deps)")
    n = 3

    def fetch():
        for _ in range(n):
            status, body = tls_get(https.port, "/mib.bin")[:2]
            assert status == 200 and body == docroot.read("mib.bin")

    calls = strace_counts(https.proc.pid, fetch)
    sends = sum(calls.get(k, 0) for k in ("sendto", "sendmsg", "write", "writev"))
    # per connection: the handshake's flights, the head, 16 chunks, the
    # close_notify, and a few sends that found the socket full
    assert sends <= n * 40, calls


def test_flags_and_config_file(docroot, tmp_path):
    require_kind("user")
    from engines import HTTPD_BIN
    r = subprocess.run([HTTPD_BIN, "--tls-port", "8443"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "needs --tls-cert and --tls-key" in r.stderr
    ca = tlscert.make_ca()
    r = subprocess.run([HTTPD_BIN, "--tls-port", "8443", "--tls-cert", ca["cert"],
                        "--tls-key", ca["ca"], "--test-config"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1 and "--tls-key" in r.stderr, r.stderr
    r = subprocess.run([HTTPD_BIN, "--help"], capture_output=True, text=True, timeout=10)
    for flag in ("--tls-port", "--tls-cert", "--tls-key", "--tls-handshake-timeout-ms"):
        assert flag in r.stdout
    # the same from a --config file
    port, tls_port = free_port(), free_port()
    conf = tmp_path / "httpd.conf"
    conf.write_text(f"port {port}\ntls-port {tls_port}\ntls-cert {ca['cert']}\n"
                    f"tls-key {ca['key']}\nbind 127.0.0.1\n")
    e = UserHttpd("epoll", str(tmp_path))
    e.start(docroot.root, port=port, args=["--config", str(conf)])
    tlscert.TLS_PORTS[tls_port] = ca["ca"]
    try:
        assert tls_get(tls_port)[:2] == (200, b"hello\n")
        assert get(port, "/a.txt").status == 200
    finally:
        tlscert.TLS_PORTS.pop(tls_port, None)
        e.stop()


def test_tls_port_that_is_the_plain_port_is_refused_by_number():
    """One port cannot be both plain and TLS: refused at start, naming it."""
    err = httpd_refuses("--root", "/", "--tls-port", "1", "--tls-cert", "/c", "--tls-key", "/k")
    assert "--tls-port 1: is --port too" in err, err
