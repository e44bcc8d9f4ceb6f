"""The HTTPS engines of the VM (engines.VM_KERNEL: khttpd behind ktcp-tlsd,
ktcp-httpd over kTLS) run the whole suite with the kernel writing and
reading the records: this checks that they do, one connection at a time,
through the kernel's own kTLS counters."""
import contextlib
import shutil
import socket
import ssl

import pytest

from engines import tlscert
from rawhttp import Conn
from sclient import SClient
from testlib import strace_counts, tls_stat


def test_records_written_and_read_by_the_kernel(http_engine, docroot):
    if not getattr(http_engine.engine, "ktls", False):
        pytest.skip("an HTTPS engine whose records the kernel writes and reads (kTLS, in the VM)")
    before = tls_stat()
    with Conn(http_engine.port) as c:
        for _ in range(2):  # keep-alive: a request read from a record, twice
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            r = c.read_response()
            assert r.status == 200 and r.body == docroot.read("a.txt")
    after = tls_stat()
    # one more session each way: the connection's keys went into the kernel
    assert after.get("TlsTxSw", 0) > before.get("TlsTxSw", 0), (before, after)
    assert after.get("TlsRxSw", 0) > before.get("TlsRxSw", 0), (before, after)


def traced_user_ktls(http_engine):
    """The engine when it is ktcp-httpd over kTLS and strace is here, else
    the test is skipped."""
    engine = http_engine.engine
    if not getattr(engine, "ktls", False) or engine.kind == "kernel":
        pytest.skip("ktcp-httpd over kTLS (in the VM)")
    if not shutil.which("strace"):
        pytest.skip("strace not installed (scripts/deps)")
    return engine


def traced_keepalive(http_engine, req, status, body, n, timeout=10):
    """System calls of ktcp-httpd over kTLS (traced_user_ktls) while one
    keep-alive connection sends req n times, each answered with status
    and body; the handshake and a first answer come before the count."""
    engine = traced_user_ktls(http_engine)
    with Conn(http_engine.port, timeout=timeout) as c:
        c.send(req)
        assert c.read_response().status == status

        def requests():
            for _ in range(n):
                c.send(req)
                r = c.read_response()
                assert r.status == status and r.body == body

        return strace_counts(engine.proc.pid, requests)


def test_ktls_keepalive_request_is_one_read(http_engine, docroot):
    """ktcp-httpd over kTLS: a keep-alive request is one recvmsg (it
    returns every record the kernel has ready, so a short one found the
    socket empty), then the answer and the wait. Before, every request
    ended in a second recvmsg that failed with EAGAIN."""
    n = 200
    calls = traced_keepalive(http_engine, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200,
                             docroot.read("a.txt"), n)
    reads = sum(calls.get(k, 0) for k in ("recvmsg", "recvfrom", "read"))
    assert reads <= n * 1.1, calls


def test_ktls_answer_goes_from_its_iovec_to_the_kernel(http_engine, docroot):
    """ktcp-httpd over kTLS, where the kernel reads and writes every
    record: a keep-alive answer, head and body, is one sendmsg of its
    iovec, and the request one recvmsg, with no OpenSSL in between. Before,
    the two went through OpenSSL's record layer, the answer as a copy in
    one buffer written with write: in the 6.1 guest at one connection
    that was half of the server's user time a request."""
    n = 200
    calls = traced_keepalive(http_engine, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200,
                             docroot.read("a.txt"), n)
    assert calls.get("write", 0) <= n * 0.1, calls
    assert n <= calls.get("sendmsg", 0) <= n * 1.1, calls


def ktls_engine(http_engine):
    engine = http_engine.engine
    if not getattr(engine, "ktls", False):
        pytest.skip("an HTTPS engine whose records the kernel writes and reads (kTLS, in the VM)")
    return engine


def kept_get(s, body):
    """A keep-alive GET of a.txt on the TLS socket s, read to the end of
    its body (an answer of 200)."""
    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while not got.endswith(body):
        more = s.recv(65536)
        assert more, got
        got += more
    assert got.startswith(b"HTTP/1.1 200"), got[:200]


def test_client_close_notify_over_ktls_ends_the_connection(http_engine, docroot):
    """A client that ends a kept connection with a close_notify, which
    the kernel reads as a record of its own: the server ends the
    connection at once (ktcp-httpd with its own close_notify), not at the
    idle timeout. Three connections."""
    ktls_engine(http_engine)
    body = docroot.read("a.txt")
    for _ in range(3):
        # the TLS socket takes the plain one's descriptor
        with tlscert.wrap(socket.create_connection(("127.0.0.1", http_engine.port), timeout=5),
                          http_engine.port) as s:
            kept_get(s, body)
            plain = None
            try:
                plain = s.unwrap()  # the close_notify, then the server's
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError):
                pass  # or its FIN first
            except TimeoutError:
                pytest.fail("the server did not end the connection after the close_notify")
            if plain is not None:
                with plain:
                    assert plain.recv(100) == b""  # then its FIN


SCLIENT_GET = "GET /a.txt HTTP/1.1\nHost: x\n\n"  # s_client -crlf sends CRLF


@contextlib.contextmanager
def served_sclient(http_engine, version):
    """openssl s_client (version: -tls1_2, -tls1_3) on the engine's
    port, once a first GET of a.txt was answered."""
    with SClient(http_engine.port, tlscert.TLS_PORTS[http_engine.port], version) as c:
        c.send(SCLIENT_GET)
        assert c.wait_for("\r\n\r\nhello\n", 1), c.output[-2000:]
        yield c


def test_renegotiation_over_ktls_ends_the_connection(http_engine, docroot):
    """A TLS 1.2 client that asks to renegotiate mid keep-alive (s_client's
    "R"): kTLS cannot take new keys, and the server refuses renegotiation
    as nginx does, so its ClientHello, a handshake record the kernel
    reads, ends the connection with no answer more; the server goes on
    serving."""
    ktls_engine(http_engine)
    for _ in range(2):
        with served_sclient(http_engine, "-tls1_2") as c:
            c.command("R")
            # the server may end it before the request is typed
            c.send(SCLIENT_GET)
            assert c.exited_within(10), "not closed: " + c.output[-2000:]
            assert c.output.count("\r\n\r\nhello\n") == 1, c.output[-2000:]
    with Conn(http_engine.port) as c:
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.body == docroot.read("a.txt")


def traced_closes(http_engine, docroot, n):
    """System calls of ktcp-httpd over kTLS (traced_user_ktls) while n
    connections one after another each get a.txt with `Connection:
    close` and see the server close."""
    engine = traced_user_ktls(http_engine)
    req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

    def connections():
        for _ in range(n):
            with Conn(http_engine.port) as c:
                c.send(req)
                r = c.read_response()
                assert r.status == 200 and r.body == docroot.read("a.txt")
                assert c.closed_within(5)

    return strace_counts(engine.proc.pid, connections)


def test_ktls_handshake_reads_whole_records(http_engine, docroot):
    """ktcp-httpd over kTLS reads the handshake's records whole with what
    follows (read-ahead from the first byte, as nginx), and kTLS still
    takes the records after it: OpenSSL opens what it already holds and
    the kernel the rest. Before, every handshake record was two reads, a
    header's and a body's: 12 reads a connection, 7 now."""
    n = 30
    before = tls_stat()
    calls = traced_closes(http_engine, docroot, n)
    after = tls_stat()
    reads = sum(calls.get(k, 0) for k in ("recvmsg", "recvfrom", "read"))
    assert reads <= n * 8, calls  # 12 a connection before
    # every connection's records after the handshake were the kernel's
    assert after.get("TlsRxSw", 0) - before.get("TlsRxSw", 0) >= n, (before, after)


def test_ktls_close_looks_at_tcp_once(http_engine, docroot):
    """ktcp-httpd over kTLS ends a `Connection: close` answer with the
    close_notify and then waits for TCP's queue to drain (records kTLS
    still holds must reach TCP before the FIN), once: kTLS sends its
    records in order, so the alert needs no wait before it, and the close
    after the shutdown has nothing more to wait for. Each look is one
    SIOCOUTQ, plus TCP_INFO only when the queue is not empty. Before, the
    end waited before the alert and after it and once more before the
    close, each look a TCP_INFO and a SIOCOUTQ: 18 calls a connection
    here (6.12 guest), 4.6 now."""
    n = 30
    calls = traced_closes(http_engine, docroot, n)
    looks = calls.get("ioctl", 0) + calls.get("getsockopt", 0)
    assert looks <= n * 6, {k: calls.get(k, 0) for k in ("ioctl", "getsockopt", "shutdown", "epoll_pwait", "clock_gettime")}


def test_ktls_send_queue_grows_for_a_reader_that_keeps_up(http_engine, docroot):
    """ktcp-httpd over kTLS: a large body to a reader that keeps up queues
    more as it goes (TCP_NOTSENT_LOWAT doubled from 64 KiB to 4 MiB at
    each wait for room that ends soon), as autotuning grows a send buffer,
    so 1 MiB leaves in a few steps, each a wait and a sendfile. At 64 KiB
    it took about ten steps and 20 sendfile calls, half of them finding
    the socket full; a stalled reader keeps the small queue
    (test_stalled_reader_pins_little_send_queue)."""
    n, size = 10, 1 << 20
    req = b"GET /large.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-%d\r\n\r\n" % (size - 1)
    calls = traced_keepalive(http_engine, req, 206, docroot.read("large.bin")[:size], n,
                             timeout=30)
    assert calls.get("sendfile", 0) <= n * 8, calls


def response_records(port, req, size):
    """The records of one response over TLS 1.2: req sent on a fresh
    connection, the raw bytes read and parsed (5-byte headers) before
    Python's ssl opens them, until a head and size bytes of body came.
    ([(record type, length)] of what came after the request, the
    response's bytes)."""
    ctx = tlscert.context_for(port)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    records, raw = [], b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:

        def pump():
            nonlocal raw
            if outgoing.pending:
                sock.sendall(outgoing.read())
            data = sock.recv(65536)
            assert data, "closed"
            raw += data
            while len(raw) >= 5 and len(raw) >= 5 + int.from_bytes(raw[3:5], "big"):
                n = 5 + int.from_bytes(raw[3:5], "big")
                records.append((raw[0], n - 5))
                raw = raw[n:]
            incoming.write(data)

        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pump()
        if outgoing.pending:
            sock.sendall(outgoing.read())
        first = len(records)
        obj.write(req)
        sock.sendall(outgoing.read())
        got = b""
        while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < size:
            try:
                got += obj.read(65536)
            except ssl.SSLWantReadError:
                pump()
        assert got.startswith(b"HTTP/1.1 206"), got[:200]
        return records[first:], got


def test_ktls_head_shares_the_first_record_of_a_file_body(http_engine, docroot):
    """Under kTLS both ways, an answer's head goes to the kernel with
    MSG_MORE, so its record stays open and the file body's first bytes
    (sendfile) join it: a 20 KiB range of a file is two records (16 KiB,
    then the rest), not three with the head alone in the first."""
    engine = ktls_engine(http_engine)
    size = 20 << 10
    req = b"GET /mib.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-%d\r\n\r\n" % (size - 1)
    recs, _ = response_records(http_engine.port, req, size)
    data = [n for t, n in recs if t == 23]  # application data
    assert len(data) == 2, (engine.name, recs)


def test_ktls_file_body_records_start_on_pages(http_engine, docroot):
    """A file body from a page boundary, two records or more (a 256 KiB
    range): every record of it is 16 KiB of the file from a page boundary,
    4 pages for the kernel to encrypt rather than 5 (kTLS encrypts a
    record a page at a time), and as many records are made as when the
    head's record filled up. ktcp-httpd sends the head in a record of its
    own, then the whole body in one sendfile (core's http_tls_head_alone:
    a system call less than ending a shared record on a page). khttpd,
    whose sends are no system calls, keeps the head's record open for the
    body (above) and ends it where the body reaches a page boundary
    (http_tls_first_piece)."""
    engine = ktls_engine(http_engine)
    size = 256 << 10
    req = b"GET /mib.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-%d\r\n\r\n" % (size - 1)
    recs, got = response_records(http_engine.port, req, size)
    lens = [n for t, n in recs if t == 23]  # application data
    extra, odd = divmod(sum(lens) - len(got), len(lens))  # nonce and tag a record
    assert odd == 0 and extra in (16, 24), (engine.name, lens)
    plain = [n - extra for n in lens]
    head = len(got) - size
    if engine.kind == "kernel":
        assert 0 < plain[0] - head and (plain[0] - head) % 4096 == 0, (engine.name, head, plain)
        body = plain[1:-1]  # the last record: what is left
    else:
        assert plain[0] == head, (engine.name, head, plain)
        body = plain[1:]  # 256 KiB: 16 whole records
    assert body and all(n == 16384 for n in body), (engine.name, plain)
    assert len(plain) == -(-(head + size) // 16384), (engine.name, head, plain)


def test_tls13_key_update_over_ktls(http_engine):
    """A client's TLS 1.3 KeyUpdate mid keep-alive where the kernel writes
    the records (ktcp-httpd in the VM: Debian 12's OpenSSL 3.0 gives a TLS
    1.3 session kTLS TX, and reads its records itself). "k" (the client's
    new sending keys: OpenSSL reads them) is served on. "K" also asks the
    server for new sending keys, which the kernel holds and cannot change:
    OpenSSL answers with its own KeyUpdate from within the read, so the
    server must write nothing after it, not even a close_notify (the
    client reads under the new keys). The next request gets no answer and
    the connection ends at once, without a byte the client cannot decrypt;
    three connections, as the end once depended on timing. khttpd behind
    ktcp-tlsd speaks TLS 1.2, which has no KeyUpdate
    (tests/test_khttpd_tls.py hands khttpd a TLS 1.3 KeyUpdate record)."""
    engine = http_engine.engine
    if not getattr(engine, "ktls", False):
        pytest.skip("an HTTPS engine whose records the kernel writes (kTLS, in the VM)")
    if engine.kind == "kernel":
        pytest.skip("ktcp-tlsd negotiates TLS 1.2 (OpenSSL 3.0): no KeyUpdate")
    req = SCLIENT_GET
    for _ in range(3):
        with served_sclient(http_engine, "-tls1_3") as c:
            c.command("k")
            c.send(req)
            assert c.wait_for("\r\n\r\nhello\n", 2), c.output[-2000:]
            c.command("K")
            c.send(req)
            assert c.exited_within(10), "not closed: " + c.output[-2000:]
            out = c.output
            assert out.count("\r\n\r\nhello\n") == 2, out[-2000:]
            for bad in ("bad record mac", "decryption failed", "decrypt error", "wrong version"):
                assert bad not in out.lower(), out[-2000:]


def test_close_after_records_ktls_still_holds(http_engine, docroot):
    """A `Connection: close` response to a slow reader (a small buffer,
    paced): each time TCP's queue fills, the last record kTLS made goes
    to TCP only in part and kTLS keeps the rest until the socket's
    write-space callback hands it on; a close frees it and a FIN goes
    ahead of it. Whether the response's last record is one of those
    depends on where its end falls, so six lengths; the server waits for
    kTLS before it shuts and closes, and every body comes whole."""
    if not getattr(http_engine.engine, "ktls", False):
        pytest.skip("an HTTPS engine whose records the kernel writes (kTLS, in the VM)")
    whole = docroot.read("large.bin")
    for i in range(6):
        n = (1 << 19) + i * 5000
        with Conn(http_engine.port, timeout=30, rcvbuf=16384, pace=(4 << 20, 0)) as c:
            c.send(b"GET /large.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-%d\r\n"
                   b"Connection: close\r\n\r\n" % (n - 1))
            r = c.read_response()
            assert r.status == 206, r
            assert len(r.body) == n and r.body == whole[:n], (n, len(r.body))
            assert c.closed_within(5)


def server_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_idle_ktls_connection_keeps_no_openssl_state(http_engine, docroot):
    """ktcp-httpd over kTLS both ways: once a connection reads past
    OpenSSL, OpenSSL's state (session, keys, record layer) is freed, so
    a connection idle after its first answer costs the server about what
    a plain one does. 150 connections, each answered once and then held:
    the server's RSS grows by less than 4 KiB a connection, and every one
    is still served afterwards. With OpenSSL's state kept it grew by about
    16 KiB a connection (BENCHMARKS.md's idle HTTPS column)."""
    engine = http_engine.engine
    if not getattr(engine, "ktls", False) or engine.kind == "kernel":
        pytest.skip("ktcp-httpd over kTLS (in the VM)")
    req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    body = docroot.read("a.txt")
    n, warm = 150, 10
    conns = []
    try:
        for i in range(warm + n):
            if i == warm:  # the allocator's first growth is not theirs
                before = server_rss_kib(engine.proc.pid)
            c = Conn(http_engine.port, timeout=20)
            conns.append(c)
            c.send(req)
            r = c.read_response()
            assert r.status == 200 and r.body == body
        grown = server_rss_kib(engine.proc.pid) - before
        for c in conns:  # all of them were held open, and still serve
            c.send(req)
            assert c.read_response().status == 200
    finally:
        for c in conns:
            c.close()
    assert grown / n < 4, f"RSS grew {grown} KiB for {n} idle kTLS connections"


def test_ktls_close_ends_with_close_notify(http_engine, docroot):
    """ktcp-httpd over kTLS both ways, once its data bypasses OpenSSL
    and OpenSSL's state is freed: a `Connection: close` answer still ends
    with the server's close_notify (a record of its own, written on the
    socket), then its FIN. A client that takes a bare EOF as a
    truncation (suppress_ragged_eofs off) reads the whole body and a
    clean end, three times."""
    engine = http_engine.engine
    if not getattr(engine, "ktls", False) or engine.kind == "kernel":
        pytest.skip("ktcp-httpd over kTLS (in the VM)")
    body = docroot.read("a.txt")
    for _ in range(3):
        raw = socket.create_connection(("127.0.0.1", http_engine.port), timeout=10)
        with tlscert.context_for(http_engine.port).wrap_socket(
                raw, server_hostname="localhost", suppress_ragged_eofs=False) as s:
            kept_get(s, body)  # the data then goes past OpenSSL
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = b""
            while True:
                try:
                    more = s.recv(65536)
                except ssl.SSLEOFError:
                    pytest.fail(f"EOF without a close_notify after {got[:200]!r}")
                if not more:  # the close_notify
                    break
                got += more
            assert got.startswith(b"HTTP/1.1 200") and got.endswith(body), got[:300]
