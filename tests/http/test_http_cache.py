"""The content cache under abuse: gzip copies of big files are built off the
request path (first answers are identity, later ones gzip), many builds at
once never stall other clients, eviction keeps the memory it accounts
within the limit and keeps serving the right bytes, aliases of one file
share one cached body, and a same-size rewrite within one second gets a
new ETag and body. Every engine."""
import gzip
import os
import random
import threading
import time

from engines import tlscert
from rawhttp import Conn, get

GZ = [("Accept-Encoding", "gzip")]


def text(seed, size):
    """Compressible text (about 3:1), different for every seed."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(400)]
    out, n = [], 0
    while n < size:
        line = b" ".join(rng.choice(words) for _ in range(10)) + b"\n"
        out.append(line)
        n += len(line)
    return b"".join(out)[:size]


def put(root, rel, data):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def wait_gzip(port, target, original, timeout=120):
    """GET target until it comes as gzip (bounded); check its bytes."""
    deadline = time.monotonic() + timeout
    while True:
        r = get(port, target, GZ)
        assert r.status == 200
        if r.header("Content-Encoding") == "gzip":
            assert gzip.decompress(r.body) == original
            return r
        assert r.body == original
        assert time.monotonic() < deadline, f"no gzip copy of {target} in {timeout} s"
        time.sleep(0.1)


def test_big_gzip_built_off_the_request_path(http_engine):
    """The first answer for a big compressible file is identity, at once:
    the copy is built in the background and later answers carry it."""
    data = text(1, 3 << 20)
    name = f"gzbig-{http_engine.name}.txt"
    put(http_engine.root, name, data)
    first = get(http_engine.port, "/" + name, GZ)
    assert first.status == 200
    assert first.header("Content-Encoding") is None
    assert first.header("Vary") == "Accept-Encoding"
    assert first.body == data
    r = wait_gzip(http_engine.port, "/" + name, data)
    assert int(r.header("Content-Length")) == len(r.body) < len(data)
    assert r.header("ETag") != first.header("ETag")
    # built once: the copy stays
    again = get(http_engine.port, "/" + name, GZ)
    assert again.header("Content-Encoding") == "gzip" and again.body == r.body


def test_small_file_served_while_20_gzip_builds_run(http_engine):
    """20 first requests for distinct big compressible files all get
    identity; a small file keeps being served, correct, while the copies
    are built; then every copy is there."""
    names = []
    for i in range(20):
        name = f"many-{http_engine.name}/f{i}.txt"
        put(http_engine.root, name, text(100 + i, 1 << 20))
        names.append(name)
    small = open(os.path.join(http_engine.root, "a.txt"), "rb").read()

    firsts = {}

    def first(name):
        # 20 MiB at once under emulation: time enough to read it all
        with Conn(http_engine.port, timeout=120) as c:
            c.send(f"GET /{name} HTTP/1.1\r\nHost: h\r\n"
                   "Accept-Encoding: gzip\r\n\r\n".encode())
            firsts[name] = c.read_response()

    threads = [threading.Thread(target=first, args=(n,)) for n in names]
    for t in threads:
        t.start()
    worst = 0.0
    served = 0
    with Conn(http_engine.port, timeout=30) as c:
        while any(t.is_alive() for t in threads) or served < 20:
            t0 = time.monotonic()
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            r = c.read_response()
            worst = max(worst, time.monotonic() - t0)
            assert r.status == 200 and r.body == small
            served += 1
            assert served < 100000
    for t in threads:
        t.join(120)
    for n in names:
        r = firsts[n]
        assert r.status == 200 and r.header("Content-Encoding") is None, n
        assert r.body == open(os.path.join(http_engine.root, n), "rb").read()
    # a generous bound: a stalled worker would wait for builds of 20 MiB
    assert worst < 5, f"a small request waited {worst:.2f} s"
    for n in names:
        wait_gzip(http_engine.port, "/" + n,
                  open(os.path.join(http_engine.root, n), "rb").read())


def test_eviction_keeps_accounted_memory_within_the_limit(http_engine):
    """A small cache and many files: the bytes it accounts never exceed the
    limit by more than one entry, and every answer has the right bytes."""
    limit = 256 * 1024
    size = 16000
    files = {}
    for i in range(48):
        name = f"ev-{http_engine.name}/f{i:02d}.bin"
        files[name] = bytes([65 + i % 26]) * (size - i)
        put(http_engine.root, name, files[name])
    one_entry = size + 1024  # body plus the entry's and path's overhead
    with http_engine.spawn(cache_size=limit, status_path="/st") as srv:
        for rnd in range(3):
            for name, data in files.items():
                r = get(srv.port, "/" + name)
                assert r.status == 200 and r.body == data, name
                c = srv.counters()
                assert c["cache_bytes"] <= limit + one_entry, c
        c = srv.counters()
        assert c["cache_evictions"] >= 48
        assert 0 < c["cache_entries"] <= limit // size + 1
        # least recently used goes first: the newest are hits
        hits = c["cache_hits"]
        for name in list(files)[-5:]:
            assert get(srv.port, "/" + name).body == files[name]
        assert srv.counters()["cache_hits"] - hits == 5


def test_alias_shares_one_body(http_engine):
    """The same file through a symlinked directory ("self -> .") is one
    cached file: one entry, its body counted once."""
    size = 40000
    data = text(7, size)
    d = f"alias-{http_engine.name}"
    put(http_engine.root, f"{d}/f.txt", data)
    os.symlink(".", os.path.join(http_engine.root, d, "self"))
    with http_engine.spawn(status_path="/st") as srv:
        c0 = srv.counters()
        assert get(srv.port, f"/{d}/f.txt").body == data
        c1 = srv.counters()
        assert c1["cache_entries"] - c0["cache_entries"] == 1
        assert c1["cache_bytes"] - c0["cache_bytes"] >= size
        assert get(srv.port, f"/{d}/self/f.txt").body == data
        assert get(srv.port, f"/{d}/self/self/f.txt").body == data
        c2 = srv.counters()
        assert c2["cache_entries"] == c1["cache_entries"]
        assert c2["cache_bytes"] - c1["cache_bytes"] < size // 4, (c1, c2)
        # and the one gzip copy serves every alias
        a = get(srv.port, f"/{d}/f.txt", GZ)
        b = get(srv.port, f"/{d}/self/f.txt", GZ)
        assert a.header("Content-Encoding") == b.header("Content-Encoding") == "gzip"
        assert gzip.decompress(b.body) == data


def test_same_size_rewrite_in_the_same_second(http_engine):
    """A rewrite in place, same size, same second (nanoseconds differ): a
    new ETag and the new body, and the old ETag no longer matches."""
    name = f"rewrite-{http_engine.name}.txt"
    path = put(http_engine.root, name, b"first version\n")
    sec = int(time.time())
    os.utime(path, ns=(sec * 10**9 + 100, sec * 10**9 + 100))
    a = get(http_engine.port, "/" + name)
    assert a.status == 200 and a.body == b"first version\n"
    with open(path, "r+b") as f:  # the same inode
        f.write(b"other version\n")
    os.utime(path, ns=(sec * 10**9 + 200, sec * 10**9 + 200))
    time.sleep(1.2)  # past the cache's revalidation interval
    b = get(http_engine.port, "/" + name)
    assert b.status == 200 and b.body == b"other version\n"
    assert b.header("Last-Modified") == a.header("Last-Modified")
    assert b.header("ETag") != a.header("ETag")
    r = get(http_engine.port, "/" + name, [("If-None-Match", a.header("ETag"))])
    assert r.status == 200 and r.body == b"other version\n"
    r = get(http_engine.port, "/" + name, [("If-None-Match", b.header("ETag"))])
    assert r.status == 304


def test_evicted_entry_held_by_a_slow_reader_stays_counted(http_engine):
    """An entry evicted while a response still sends its body stays counted
    in cache_bytes until that response lets go of it."""
    import socket
    limit = 256 * 1024
    pin = bytes(range(256)) * 250  # 64000 bytes: a cached body
    d = f"pin-{http_engine.name}"
    put(http_engine.root, f"{d}/pin.bin", pin)
    for i in range(400):
        put(http_engine.root, f"{d}/t{i:03d}.txt", b"%03d\n" % i * 100)
    # a stalled reader is closed after one idle timeout: longer than the
    # 400 requests below take on the slowest (debug) kernel under emulation
    with http_engine.spawn(cache_size=limit, status_path="/st",
                           idle_timeout_ms=300000) as srv:
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", srv.port))
        slow = tlscert.wrap(slow, srv.port)
        # 50 responses of 64000 bytes that the client does not read: the
        # server stays in the middle of one, holding the entry
        slow.sendall(f"GET /{d}/pin.bin HTTP/1.1\r\nHost: h\r\n\r\n".encode() * 50)
        time.sleep(1)
        for i in range(400):  # push pin.bin out of the cache
            assert get(srv.port, f"/{d}/t{i:03d}.txt").status == 200
        held = srv.counters()
        assert held["cache_evictions"] > 0
        assert held["active"] >= 1, held  # the slow reader is still held
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        slow.close()  # reset: the server drops the response and its entry
        deadline = time.monotonic() + 15
        while True:
            now = srv.counters()
            if held["cache_bytes"] - now["cache_bytes"] >= len(pin):
                break
            assert time.monotonic() < deadline, (held, now)
            time.sleep(0.1)


def test_bytes_held_by_slow_readers_leave_the_cache_working(http_engine):
    """Four slow readers each hold an evicted body of a quarter of the
    budget: nearly the whole budget is held by responses, not the table.
    Eviction frees only what is in the table, so a new entry is not
    evicted by its own insert and the next request for it is a hit."""
    import socket
    limit = 256 * 1024
    d = f"held-{http_engine.name}"
    pins = [bytes([i]) * 64000 for i in range(4)]  # each kept: a quarter
    for i, pin in enumerate(pins):
        put(http_engine.root, f"{d}/pin{i}.bin", pin)
    for i in range(400):
        put(http_engine.root, f"{d}/t{i:03d}.txt", b"%03d\n" % i * 100)
    with http_engine.spawn(cache_size=limit, status_path="/st",
                           idle_timeout_ms=300000) as srv:
        slow = []
        for i in range(len(pins)):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", srv.port))
            s = tlscert.wrap(s, srv.port)
            s.sendall(f"GET /{d}/pin{i}.bin HTTP/1.1\r\nHost: h\r\n\r\n".encode() * 50)
            slow.append(s)
        try:
            time.sleep(1)
            for i in range(400):  # push every pin out of the table
                assert get(srv.port, f"/{d}/t{i:03d}.txt").status == 200
            c0 = srv.counters()
            assert c0["cache_evictions"] >= len(pins), c0
            assert c0["cache_bytes"] >= limit * 9 // 10, c0  # mostly held
            target = f"/{d}/t007.txt"
            for _ in range(3):
                assert get(srv.port, target).status == 200
            deadline = time.monotonic() + 5
            while True:
                c1 = srv.counters()
                if c1["cache_hits"] - c0["cache_hits"] >= 2:
                    break
                assert time.monotonic() < deadline, (c0, c1)
                time.sleep(0.1)
        finally:
            for s in slow:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                s.close()


def test_kept_heads_follow_the_clock_and_the_request(http_engine):
    """A file's 200 head, once kept by an engine, still carries the Date of
    the moment and the connection's own disposition, and a request that
    changes the head (a range, a condition, gzip, HEAD) is answered as it
    asks, whatever was answered for the file before."""
    data = b"kept head " * 20
    name = f"kept-{http_engine.name}.txt"
    put(http_engine.root, name, data)
    target = "/" + name
    with Conn(http_engine.port) as c:
        for _ in range(3):
            c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            r = c.read_response()
            assert r.status == 200 and r.body == data
            assert r.header("Connection") == "keep-alive"
            assert r.header("Content-Length") == str(len(data))
        first_date = r.header("Date")
        time.sleep(1.2)
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r = c.read_response()
        assert r.status == 200 and r.body == data
        assert r.header("Date") != first_date
        assert abs(email_time(r.header("Date")) - time.time()) < 3
        etag = r.header("ETag")
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n".encode())
        r = c.read_response()
        assert r.status == 206 and r.body == data[:4]
        assert r.header("Content-Range") == f"bytes 0-3/{len(data)}"
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n".encode())
        r = c.read_response()
        assert r.status == 304 and r.body == b""
        c.send(f"HEAD {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r = c.read_response("HEAD")
        assert r.status == 200 and r.header("Content-Length") == str(len(data))
    r = get(http_engine.port, target, [("Connection", "close")])
    assert r.status == 200 and r.body == data
    assert r.header("Connection") == "close"
    r = get(http_engine.port, target, version="1.0")
    assert r.status == 200 and r.body == data
    assert r.header("Connection") == "close"
    r = get(http_engine.port, target)
    assert r.header("Connection") == "keep-alive"


def test_kept_304_and_gzip_heads_follow_the_clock_and_the_request(http_engine):
    """The 304 and the gzip 200 heads are kept too, each apart from the
    plain 200's: the same bytes but Date, which follows the clock, and the
    connection's own disposition; the identity answer never gets the gzip
    head, nor a 200 the 304's."""
    import gzip
    data = b"a kept head of each kind " * 40
    name = f"kept-kinds-{http_engine.name}.txt"
    put(http_engine.root, name, data)
    target = "/" + name
    gz = "Accept-Encoding: gzip\r\n"
    with Conn(http_engine.port) as c:
        c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        r = c.read_response()
        assert r.status == 200 and r.body == data
        etag = r.header("ETag")
        inm = f"If-None-Match: {etag}\r\n"
        answers = []
        for rnd in range(2):
            for _ in range(3):
                for extra in (inm, gz, ""):
                    c.send(f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
                    answers.append((extra, c.read_response()))
            if rnd == 0:
                first = answers[-1][1].header("Date")
                time.sleep(1.2)
        for extra, r in answers:
            assert r.header("Connection") == "keep-alive"
            if extra == inm:
                assert r.status == 304 and r.body == b"", r.status
                assert r.header("ETag") == etag
                assert r.header("Content-Length") is None
                assert r.header("Content-Encoding") is None
            elif extra == gz and r.header("Content-Encoding") == "gzip":
                assert r.status == 200 and gzip.decompress(r.body) == data
                assert r.header("Content-Length") == str(len(r.body))
                assert r.header("ETag") != etag  # the gzip copy's own
            else:
                assert r.status == 200 and r.body == data
                assert r.header("Content-Encoding") is None
                assert r.header("Content-Length") == str(len(data))
        last = answers[-1][1].header("Date")
        assert last != first
        for extra, r in answers[-3:]:
            assert r.header("Date") == last or abs(
                email_time(r.header("Date")) - time.time()) < 3
    # another disposition: its own 304 and gzip heads
    for extra in (f"If-None-Match: {etag}", "Accept-Encoding: gzip"):
        k, v = extra.split(": ")
        r = get(http_engine.port, target, [(k, v), ("Connection", "close")])
        assert r.header("Connection") == "close"
        assert r.status == (304 if k == "If-None-Match" else 200)


def email_time(value):
    from email.utils import parsedate_to_datetime
    return parsedate_to_datetime(value).timestamp()
