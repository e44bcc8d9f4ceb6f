"""The open-file cache (ktcp-httpd --open-files): the cache's object of a
file whose body it does not keep in memory keeps the file's descriptor, so
a keep-alive client asking for a large file again and again costs no open
and close a request (the file's opens counted with inotify); a replaced
file is served new once the cache revalidates it and the old descriptor
is closed; --open-files bounds the descriptors kept, the files beyond it
still served; --cache-size 0 and --open-files 0 keep none. ktcp-httpd's
models over HTTP and HTTPS (the replacement test over HTTP only: what TLS
changes is the send, which the other tests cover). khttpd is skipped: the
kernel server has no such cache."""
import ctypes
import os
import struct
import time

import pytest

from rawhttp import Conn, get

BIG = 200 * 1024  # above the 64 KiB the cache keeps in memory
IN_CLOSE_NOWRITE, IN_OPEN = 0x10, 0x20
REVALIDATE_S = 1.0  # HTTP_SERVER_REVALIDATE_MS


def user_only(http_engine):
    if http_engine.engine.family != "ktcp-httpd":
        pytest.skip("khttpd: the kernel server has no open-file cache")


def blob(seed, size):
    return bytes((seed * 131 + i * 7) & 0xFF for i in range(251)) * (size // 251) + b"x" * (size % 251)


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def replace(path, data):
    """A new file renamed over path (a new inode), as a deploy does."""
    tmp = path + ".new"
    put(tmp, data)
    os.rename(tmp, path)


class Opens:
    """Opens and read-only closes of one file, by anyone (inotify)."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), IN_OPEN | IN_CLOSE_NOWRITE)
        assert wd >= 0, os.strerror(ctypes.get_errno())
        self.opens = self.closes = 0

    def read(self):
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.opens, self.closes
            at = 0
            while at < len(buf):
                _, mask, _, n = struct.unpack_from("iIII", buf, at)
                assert not mask & 0x4000, "inotify queue overflowed"
                self.opens += bool(mask & IN_OPEN)
                self.closes += bool(mask & IN_CLOSE_NOWRITE)
                at += 16 + n

    def close(self):
        os.close(self.fd)


def held(pid, prefix):
    """The link targets of the server's descriptors open on files under
    prefix (a replaced file's ends in " (deleted)")."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith(prefix + "/"):
            out.append(target)
    return sorted(out)


def settle(pid, prefix, ok, timeout=10.0):
    """held() once ok(held) (objects are freed a grace period after their
    last reference), or the last reading when the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        h = held(pid, prefix)
        if ok(h) or time.monotonic() > deadline:
            return h
        time.sleep(0.05)


def big_files(http_engine, tag, count, extra=False):
    """count large files, f0.bin.., in a folder of the document root of
    their own (of-TAG-engine); with extra, file i is i bytes longer.
    (folder, its URL path with a closing slash, {name: bytes})."""
    d = os.path.join(os.path.realpath(http_engine.root), f"of-{tag}-{http_engine.name}")
    files = {f"f{i}.bin": blob(i, BIG + (i if extra else 0)) for i in range(count)}
    for n, data in files.items():
        put(os.path.join(d, n), data)
    return d, "/" + os.path.basename(d) + "/", files


def test_keepalive_run_opens_a_large_file_once(http_engine):
    """20 requests for a 200 KiB file on one keep-alive connection: one
    open (the cache's load), kept; at most one more a revalidation period
    (its check), each closed at once. Before the cache kept descriptors
    every request opened and closed the file."""
    user_only(http_engine)
    d = os.path.join(os.path.realpath(http_engine.root), f"of-once-{http_engine.name}")
    data = blob(1, BIG)
    put(os.path.join(d, "big.bin"), data)
    with http_engine.spawn() as srv:
        watch = Opens(os.path.join(d, "big.bin"))
        try:
            start = time.monotonic()
            with Conn(srv.port) as c:
                for _ in range(20):
                    c.send(f"GET /{os.path.basename(d)}/big.bin HTTP/1.1\r\nHost: h\r\n\r\n"
                           .encode())
                    r = c.read_response()
                    assert r.status == 200 and r.body == data
            elapsed = time.monotonic() - start
            opens, closes = watch.read()
        finally:
            watch.close()
        assert opens - closes == 1, (opens, closes)  # the cache's, still open
        assert opens <= 2 + int(elapsed / REVALIDATE_S), (opens, elapsed)
        assert len(held(srv.proc.pid, d)) == 1


def test_replaced_file_served_new_and_old_descriptor_closed(http_engine):
    """Eight large files, each replaced (renamed over) three times: after
    the revalidation period every one is served new, and the server holds
    one descriptor a file, none of a replaced one. A ninth the server's
    user may no longer read is stale then as well: 403, its descriptor
    closed."""
    user_only(http_engine)
    if http_engine.tls:
        pytest.skip("the descriptor's life is the same over TLS; the other tests "
                    "cover its sends")
    root = os.path.realpath(http_engine.root)
    d = os.path.join(root, f"of-replace-{http_engine.name}")
    names = [f"f{i}.bin" for i in range(8)]
    rel = "/" + os.path.basename(d) + "/"
    for i, n in enumerate(names):
        put(os.path.join(d, n), blob(i, BIG))
    locked = os.path.join(d, "locked.bin")
    put(locked, blob(99, BIG))
    with http_engine.spawn() as srv:
        pid = srv.proc.pid
        for i, n in enumerate(names):
            assert get(srv.port, rel + n).body == blob(i, BIG)
        assert get(srv.port, rel + "locked.bin").body == blob(99, BIG)
        assert len(held(pid, d)) == len(names) + 1  # kept by the cache
        os.chmod(locked, 0)
        for round_ in range(1, 4):
            for i, n in enumerate(names):
                replace(os.path.join(d, n), blob(round_ * 10 + i, BIG))
            time.sleep(REVALIDATE_S + 0.2)
            assert get(srv.port, rel + "locked.bin").status == 403
            for i, n in enumerate(names):
                r = get(srv.port, rel + n)
                assert r.status == 200 and r.body == blob(round_ * 10 + i, BIG), (round_, n)
            h = settle(pid, d, lambda h: len(h) == len(names) and
                       not any(t.endswith(" (deleted)") for t in h))
            assert sorted(h) == sorted(os.path.join(d, n) for n in names), h


def test_open_files_limit_holds_and_beyond_it_files_are_served(http_engine):
    """--open-files 2 and ten large files asked for (whole, in ranges, and
    HEAD): at most two descriptors kept, every answer right, and the status
    page's cache_open_files says how many are held."""
    user_only(http_engine)
    d, rel, files = big_files(http_engine, "limit", 10, extra=True)
    with http_engine.spawn(args=["--open-files", "2"], status_path="/st") as srv:
        for _ in range(2):
            for n, data in files.items():
                assert get(srv.port, rel + n).body == data
                r = get(srv.port, rel + n, [("Range", "bytes=100-199,-50")])
                assert r.status == 206 and b"multipart/byteranges" in \
                    r.header("Content-Type").encode()
                assert data[100:200] in r.body and data[-50:] in r.body
                r = get(srv.port, rel + n, [("Range", "bytes=1000-")])
                assert r.status == 206 and r.body == data[1000:]
                r = get(srv.port, rel + n, method="HEAD")
                assert r.status == 200 and r.body == b""
                assert r.header("Content-Length") == str(len(data))
                # (a request beyond the two closes its own descriptor
                # after its last byte: a moment later)
                assert len(settle(srv.proc.pid, d, lambda h: len(h) <= 2)) <= 2
        assert len(settle(srv.proc.pid, d, lambda h: len(h) == 2)) == 2
        assert srv.counters()["cache_open_files"] == 2


@pytest.mark.parametrize("option", [{"cache_size": 0}, {"args": ["--open-files", "0"]}],
                         ids=["cache-size-0", "open-files-0"])
def test_no_descriptor_kept_without_the_cache(http_engine, option):
    """--cache-size 0 (nothing is kept) and --open-files 0: large files
    are served as before, each request opening its file, and no
    descriptor stays open once the answers are sent."""
    user_only(http_engine)
    d, rel, files = big_files(http_engine, "none", 3)
    with http_engine.spawn(status_path="/st", **option) as srv:
        for n, data in files.items():
            with Conn(srv.port) as c:
                for _ in range(3):
                    c.send(f"GET {rel}{n} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
                    assert c.read_response().body == data
            r = get(srv.port, rel + n, [("Range", "bytes=5-9")])
            assert r.status == 206 and r.body == data[5:10]
        assert settle(srv.proc.pid, d, lambda h: not h) == []
        assert srv.counters()["cache_open_files"] == 0


def test_new_file_takes_the_least_recently_used_descriptor(http_engine):
    """--open-files 2 and three large files asked for in turn, then the
    third again and again on one keep-alive connection: the first, least
    recently used, gives its descriptor up to the third, whose requests
    then open nothing, as nginx's open_file_cache closes its least
    recently used. Before, the two first kept theirs for good and every
    request for the third opened and closed it."""
    user_only(http_engine)
    d, rel, files = big_files(http_engine, "lru", 3)
    with http_engine.spawn(args=["--open-files", "2"], status_path="/st") as srv:
        for n, data in files.items():
            assert get(srv.port, rel + n).body == data
        watch = Opens(os.path.join(d, "f2.bin"))
        try:
            with Conn(srv.port) as c:
                for _ in range(5):
                    c.send(f"GET {rel}f2.bin HTTP/1.1\r\nHost: h\r\n\r\n".encode())
                    assert c.read_response().body == files["f2.bin"]
            opens, _ = watch.read()
        finally:
            watch.close()
        assert opens <= 1, opens  # a revalidation's, at most
        want = [os.path.join(d, "f1.bin"), os.path.join(d, "f2.bin")]
        assert settle(srv.proc.pid, d, lambda h: h == want) == want
        assert srv.counters()["cache_open_files"] == 2


def test_default_keeps_descriptors_with_more_connections_than_the_limit(http_engine):
    """The default --open-files with --max-conns 10000 under a descriptor
    limit of 1,024: connections could never use them all, and the cache
    still keeps a large file's descriptor (it kept none: the limit less
    --max-conns was below zero)."""
    user_only(http_engine)
    d = os.path.join(os.path.realpath(http_engine.root), f"of-default-{http_engine.name}")
    data = blob(3, BIG)
    put(os.path.join(d, "big.bin"), data)
    with http_engine.spawn(nofile=1024, args=["--max-conns", "10000"],
                           status_path="/st") as srv:
        assert get(srv.port, f"/{os.path.basename(d)}/big.bin").body == data
        assert held(srv.proc.pid, d) == [os.path.join(d, "big.bin")]
        assert srv.counters()["cache_open_files"] == 1
