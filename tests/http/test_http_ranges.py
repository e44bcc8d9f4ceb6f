"""Several byte ranges: 206 multipart/byteranges with a random boundary,
each part's bytes exact, from a cached small file and from a large file
sent from the page cache; too many or overlapping ranges get the whole
200; If-Range, HEAD and keep-alive framing; curl as a real client."""
import re
import shutil
import subprocess

import pytest

from engines import tlscert
from rawhttp import Conn, get


def parse_multipart(resp):
    """The parts of a multipart/byteranges body, strictly: [(type, first,
    last, size, bytes)]. Fails on anything a client could not parse."""
    ctype = resp.header("Content-Type")
    m = re.fullmatch(r"multipart/byteranges; boundary=([0-9A-Za-z'()+_,./:=?-]{1,70})", ctype)
    assert m, ctype
    delim = b"--" + m.group(1).encode()
    body = resp.body
    assert int(resp.header("Content-Length")) == len(body)
    # the body: an optional preamble (here the CRLF before the first
    # delimiter), parts each starting with CRLF--boundary, the close
    assert body.startswith(b"\r\n" + delim + b"\r\n"), body[:80]
    assert body.endswith(b"\r\n" + delim + b"--\r\n"), body[-80:]
    inner = body[len(b"\r\n" + delim + b"\r\n"):-len(b"\r\n" + delim + b"--\r\n")]
    parts = []
    for raw in inner.split(b"\r\n" + delim + b"\r\n"):
        head, sep, data = raw.partition(b"\r\n\r\n")
        assert sep, raw[:80]
        fields = dict(
            (k.strip().lower(), v.strip())
            for k, v in (line.split(b":", 1) for line in head.split(b"\r\n")))
        cr = re.fullmatch(rb"bytes (\d+)-(\d+)/(\d+)", fields[b"content-range"])
        assert cr, fields
        first, last, size = (int(x) for x in cr.groups())
        assert len(data) == last - first + 1
        parts.append((fields[b"content-type"].decode(), first, last, size, data))
    return m.group(1), parts


def check_parts(resp, data, ctype, want):
    assert resp.status == 206, resp
    assert resp.header("Content-Range") is None
    boundary, parts = parse_multipart(resp)
    assert [(p[1], p[2]) for p in parts] == want
    for t, first, last, size, body in parts:
        assert t == ctype
        assert size == len(data)
        assert body == data[first:last + 1]
    return boundary


def test_two_ranges_small_file(http_engine):
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-1,3-4")])
    check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 1), (3, 4)])


def test_ranges_large_file_exact(http_engine, docroot):
    data = docroot.read("mib.bin")
    n = len(data)
    spec = "bytes=0-0,100-199,-10,500000-600000,1000-"
    r = get(http_engine.port, "/mib.bin", [("Range", spec)])
    # 1000- overlaps the others: together more than the file, so the whole
    assert r.status == 200 and r.body == data
    spec = "bytes=0-0,100-199,-10,500000-600000"
    r = get(http_engine.port, "/mib.bin", [("Range", spec)])
    check_parts(r, data, "application/octet-stream",
                [(0, 0), (100, 199), (n - 10, n - 1), (500000, 600000)])


def test_ranges_on_khttpd_kthread(http_engine, docroot):
    """khttpd's kthread mode sends the same parts (the suite's khttpd runs
    on the workqueue): a small file's and the 1 MiB file's, zero-copy."""
    if http_engine.kind != "kernel" or http_engine.tls:
        pytest.skip("khttpd's kthread mode: on the plain khttpd engine")
    data = docroot.read("mib.bin")
    n = len(data)
    with http_engine.spawn(mode="kthread") as srv:
        r = get(srv.port, "/a.txt", [("Range", "bytes=0-1,3-4")])
        check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 1), (3, 4)])
        r = get(srv.port, "/mib.bin", [("Range", "bytes=0-0,100-199,-10,500000-600000")])
        check_parts(r, data, "application/octet-stream",
                    [(0, 0), (100, 199), (n - 10, n - 1), (500000, 600000)])


def test_reversed_and_unsatisfiable_dropped(http_engine, docroot):
    # the order asked is the order sent (as nginx)
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=4-5, 0-1")])
    check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(4, 5), (0, 1)])
    # an unsatisfiable range among others is dropped; one left: a plain 206
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-1,100-200")])
    assert r.status == 206 and r.header("Content-Range") == "bytes 0-1/6"
    assert r.body == b"he"
    # none satisfiable: 416
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=6-,100-200")])
    assert r.status == 416 and r.header("Content-Range") == "bytes */6"
    # empty list elements are skipped
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=,0-0,,2-2,")])
    check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 0), (2, 2)])


def test_overlapping_ranges(http_engine, docroot):
    # overlaps within the file's size are served as asked
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-2,1-3")])
    check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 2), (1, 3)])
    # overlaps adding up past the whole: the whole 200
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-4,1-5")])
    assert r.status == 200 and r.body == b"hello\n"
    data = docroot.read("mib.bin")
    r = get(http_engine.port, "/mib.bin", [("Range", "bytes=0-,0-")])
    assert r.status == 200 and r.body == data


def test_many_ranges_whole_file(http_engine, docroot):
    data = docroot.read("mib.bin")
    sixteen = ",".join(f"{i * 10}-{i * 10 + 4}" for i in range(16))
    r = get(http_engine.port, "/mib.bin", [("Range", "bytes=" + sixteen)])
    check_parts(r, data, "application/octet-stream",
                [(i * 10, i * 10 + 4) for i in range(16)])
    r = get(http_engine.port, "/mib.bin", [("Range", "bytes=" + sixteen + ",200-201")])
    assert r.status == 200 and r.body == data
    # 1,000 ranges: the whole file, and the connection still serves
    thousand = ",".join(f"{i}-{i}" for i in range(1000))
    with Conn(http_engine.port) as c:
        c.send(f"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes={thousand}\r\n\r\n".encode())
        r = c.read_response()
        assert r.status == 200 and r.body == b"hello\n"
        c.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,5-5\r\n\r\n")
        r = c.read_response()
        check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 0), (5, 5)])


def test_malformed_set_ignored(http_engine):
    for spec in ("bytes=0-1,x-2", "bytes=0-1,3-2", "bytes=0-1;2-3", "bytes=0-1,-"):
        r = get(http_engine.port, "/a.txt", [("Range", spec)])
        assert r.status == 200 and r.body == b"hello\n", spec


def test_boundary_random(http_engine):
    seen = set()
    for _ in range(4):
        r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-0,2-2")])
        seen.add(parse_multipart(r)[0])
    assert len(seen) == 4


def test_if_range_multi(http_engine):
    etag = get(http_engine.port, "/a.txt").header("ETag")
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-0,2-3"), ("If-Range", etag)])
    check_parts(r, b"hello\n", "text/plain; charset=utf-8", [(0, 0), (2, 3)])
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-0,2-3"), ("If-Range", '"old"')])
    assert r.status == 200 and r.body == b"hello\n"


def test_head_multi(http_engine, docroot):
    g = get(http_engine.port, "/mib.bin", [("Range", "bytes=0-9,20-29")])
    h = get(http_engine.port, "/mib.bin", [("Range", "bytes=0-9,20-29")], method="HEAD")
    assert h.status == 206 and h.body == b""
    assert h.header("Content-Length") == g.header("Content-Length")
    assert h.header("Content-Type").startswith("multipart/byteranges; boundary=")


def test_keep_alive_after_parts(http_engine, docroot):
    data = docroot.read("mib.bin")
    with Conn(http_engine.port) as c:
        # pipelined: the parts of both, then a plain request, framed right
        c.send(b"GET /mib.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9,-5\r\n\r\n"
               b"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0,-1\r\n\r\n"
               b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        check_parts(c.read_response(), data, "application/octet-stream",
                    [(0, 9), (len(data) - 5, len(data) - 1)])
        check_parts(c.read_response(), b"hello\n", "text/plain; charset=utf-8",
                    [(0, 0), (5, 5)])
        assert c.read_response().body == b"hello\n"


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_curl_range(http_engine, tmp_path):
    out = tmp_path / "out"
    hdr = tmp_path / "hdr"
    subprocess.run(["curl", "-sS", "--max-time", "10", "--range", "0-1,5-6", "-D", str(hdr),
                    "-o", str(out), *tlscert.curl_args(http_engine.port),
                    tlscert.url(http_engine.port, "/mib.bin")],
                   check=True)
    head = hdr.read_bytes().decode()
    assert head.startswith("HTTP/1.1 206 Partial Content\r\n")
    m = re.search(r"(?i)^content-type: multipart/byteranges; boundary=(\S+)\r$", head, re.M)
    assert m, head
    body = out.read_bytes()
    assert body.count(b"--" + m.group(1).encode()) == 3
    assert b"Content-Range: bytes 0-1/1048576\r\n" in body
    assert b"Content-Range: bytes 5-6/1048576\r\n" in body
