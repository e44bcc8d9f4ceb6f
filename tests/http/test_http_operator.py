"""Operator features, on every engine: Cache-Control/Expires (expires_s),
gzip_static, custom error pages, a mime.types table (user engines), and
response heads for long directory names (a 301 that fits, a 414 when the
Location cannot, never a wrong Location or a silent close)."""
import gzip
import os
import time
import urllib.parse
from email.utils import parsedate_to_datetime

import pytest

from rawhttp import Conn, get

JS = b"function f() { return 'original javascript'; }\n" * 40
# not gzip(JS): a client getting these bytes got the file.gz, not a copy
# the server compressed itself
JS_GZ = gzip.compress(b"/* precompressed */\n" + JS, mtime=0)
OLD_TXT = b"a text file with an outdated .gz beside it\n" * 10
PAGE_404 = b"<!DOCTYPE html><title>gone</title><p>custom not found</p>\n"
PAGE_405 = b"<p>custom method not allowed</p>\n"
PAGE_400 = b"<p>custom bad request</p>\n"
PAGE_413 = b"<p>custom too large</p>\n"
# two levels of 240-byte names: 720 bytes each, percent-encoded
LONG = "\u00e9" * 120
FITS = "d" * 200  # three levels: a Location of about 600 bytes


@pytest.fixture(scope="module")
def ops(docroot):
    """Files under <root>/ops for this module's tests."""
    root = docroot.root
    put = docroot.put
    put("ops/app.js", JS)
    put("ops/app.js.gz", JS_GZ)
    put("ops/plain.js", JS)  # no .gz beside it
    put("ops/old.txt", OLD_TXT)
    put("ops/old.txt.gz", gzip.compress(b"stale", mtime=0))
    past = time.time() - 3600
    os.utime(os.path.join(root, "ops/old.txt.gz"), (past, past))
    put("ops/dirgz.css", b"body { margin: 0 }\n" * 30)
    os.makedirs(os.path.join(root, "ops/dirgz.css.gz"), exist_ok=True)
    put("ops/idx/index.html", b"<p>index</p>\n" * 30)
    put("ops/idx/index.html.gz", gzip.compress(b"<p>index gz</p>\n", mtime=0))
    put("ops/err/404.html", PAGE_404)
    put("ops/err/405.html", PAGE_405)
    put("ops/err/400.html", PAGE_400)
    put("ops/err/413.html", PAGE_413)
    os.makedirs(os.path.join(root, "ops/err/dir.html"), exist_ok=True)
    put("ops/f.weird", b"weird\n")
    put("ops/f.mjs", b"export {}\n")
    os.makedirs(os.path.join(root, "ops", LONG, LONG), exist_ok=True)
    os.makedirs(os.path.join(root, "ops", FITS, FITS, FITS), exist_ok=True)
    return docroot


def date_of(r, name):
    return parsedate_to_datetime(r.header(name)).timestamp()


# ---- expires ----

def test_expires_on_file_responses(http_engine, ops):
    # off by default
    r = get(http_engine.port, "/a.txt")
    assert r.status == 200
    assert r.header("Cache-Control") is None and r.header("Expires") is None
    with http_engine.spawn(expires_s=3600) as srv:
        r = get(srv.port, "/a.txt")
        assert r.status == 200 and r.body == b"hello\n"
        assert r.header("Cache-Control") == "max-age=3600"
        assert date_of(r, "Expires") - date_of(r, "Date") == 3600
        # a range, a 304 and a HEAD carry them too
        r = get(srv.port, "/bytes.bin", [("Range", "bytes=0-9")])
        assert r.status == 206 and r.header("Cache-Control") == "max-age=3600"
        etag = get(srv.port, "/a.txt").header("ETag")
        r = get(srv.port, "/a.txt", [("If-None-Match", etag)])
        assert r.status == 304 and r.header("Cache-Control") == "max-age=3600"
        assert date_of(r, "Expires") - date_of(r, "Date") == 3600
        r = get(srv.port, "/idx/", method="HEAD")
        assert r.status == 200 and r.header("Cache-Control") == "max-age=3600"
        # errors, redirects and listings do not
        for path in ("/nope.txt", "/sub", "/sub/"):
            r = get(srv.port, path)
            assert r.status in (404, 301, 200), r
            assert r.header("Cache-Control") is None, path
            assert r.header("Expires") is None, path


# ---- gzip_static ----

def test_gzip_static_served(http_engine, ops):
    # off by default: the file, or the server's own gzip copy of it
    r = get(http_engine.port, "/ops/app.js", [("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.body != JS_GZ
    if r.header("Content-Encoding") == "gzip":
        assert gzip.decompress(r.body) == JS
    with http_engine.spawn(gzip_static=True) as srv:
        plain = get(srv.port, "/ops/app.js")
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip, deflate")])
        assert r.status == 200
        assert r.body == JS_GZ
        assert r.header("Content-Encoding") == "gzip"
        assert r.header("Vary") == "Accept-Encoding"
        assert r.header("Content-Type").startswith("text/javascript")
        assert int(r.header("Content-Length")) == len(JS_GZ)
        # the validators are the .gz file's
        assert r.header("ETag") and r.header("ETag") != plain.header("ETag")
        assert plain.body == JS and plain.header("Content-Encoding") is None
        assert plain.header("Vary") == "Accept-Encoding"
        # q=0 refuses it
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip;q=0")])
        assert r.body == JS and r.header("Content-Encoding") is None
        # HEAD: the same head, no body
        h = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip")],
                method="HEAD")
        assert h.status == 200 and h.body == b""
        assert h.header("Content-Length") == str(len(JS_GZ))
        gz = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip")])
        assert h.header("ETag") == gz.header("ETag")
        # 304 against the .gz's ETag
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip"),
                                         ("If-None-Match", gz.header("ETag"))])
        assert r.status == 304 and r.body == b""
        # a range of the .gz file
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip"),
                                         ("Range", "bytes=0-9")])
        assert r.status == 206 and r.body == JS_GZ[:10]
        assert r.header("Content-Range") == f"bytes 0-9/{len(JS_GZ)}"
        assert r.header("Content-Encoding") == "gzip"
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip"),
                                         ("Range", f"bytes={len(JS_GZ)}-")])
        assert r.status == 416
        # an index's .gz
        r = get(srv.port, "/ops/idx/", [("Accept-Encoding", "gzip")])
        assert r.status == 200 and r.header("Content-Encoding") == "gzip"
        assert gzip.decompress(r.body) == b"<p>index gz</p>\n"


@pytest.mark.parametrize("name", ["ops/plain.js", "ops/old.txt", "ops/dirgz.css"])
def test_gzip_static_needs_a_newer_regular_gz(http_engine, ops, name):
    """No .gz, an older one, or a directory named file.gz: the file (or the
    server's own gzip copy) instead."""
    with http_engine.spawn(gzip_static=True) as srv:
        # the option is on: a usable .gz is served
        assert get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip")]).body == JS_GZ
        for _ in range(2):
            r = get(srv.port, "/" + name, [("Accept-Encoding", "gzip")])
            assert r.status == 200
            body = r.body
            if r.header("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert body == ops.read(name)


def test_gzip_static_with_dynamic_gzip_off(http_engine, ops):
    with http_engine.spawn(gzip_static=True, gzip=False) as srv:
        r = get(srv.port, "/ops/app.js", [("Accept-Encoding", "gzip")])
        assert r.body == JS_GZ and r.header("Content-Encoding") == "gzip"
        r = get(srv.port, "/ops/plain.js", [("Accept-Encoding", "gzip")])
        assert r.body == JS and r.header("Content-Encoding") is None


# ---- error pages ----

PAGES = ("404=/ops/err/404.html,405=/ops/err/405.html,400=/ops/err/400.html,"
         "403=/ops/err/missing.html,414=/ops/err/dir.html,413=/ops/err/413.html")


def test_error_pages(http_engine, ops):
    with http_engine.spawn(error_pages=PAGES) as srv:
        r = get(srv.port, "/no/such/file")
        assert r.status == 404 and r.body == PAGE_404
        assert r.header("Content-Type").startswith("text/html")
        assert r.header("ETag") is None and r.header("Last-Modified") is None
        h = get(srv.port, "/no/such/file", method="HEAD")
        assert h.status == 404 and h.body == b""
        assert h.header("Content-Length") == str(len(PAGE_404))
        # the connection goes on after a custom page, as after the text
        with Conn(srv.port) as c:
            c.send(b"GET /nope HTTP/1.1\r\nHost: h\r\n\r\n"
                   b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            assert c.read_response().body == PAGE_404
            assert c.read_response().body == b"hello\n"
        # 405 keeps its Allow
        with Conn(srv.port) as c:
            c.send(b"DELETE /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            r = c.read_response()
        assert r.status == 405 and r.body == PAGE_405
        assert r.header("Allow") == "GET, HEAD"
        # a missing page, or one that is a directory: the built-in text
        r = get(srv.port, "/link-out")
        assert r.status == 403 and r.body == b"403 Forbidden\n"
        # a parse error's page, then the close
        with Conn(srv.port) as c:
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n")
            r = c.read_response()
            assert r.status == 400 and r.body == PAGE_400
            assert c.closed_within(5)
        # a request line over the limit: its page is a directory, the text
        with Conn(srv.port) as c:
            c.send(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
            r = c.read_response()
            assert r.status == 414 and r.body == b"414 URI Too Long\n"
        # a body over the limit: its page, then the close
        with Conn(srv.port) as c:
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nContent-Length: 10000000\r\n\r\n")
            r = c.read_response()
            assert r.status == 413 and r.body == PAGE_413
            assert c.closed_within(5)
        # a file the server has does not use the pages
        assert get(srv.port, "/a.txt").body == b"hello\n"


def test_error_page_that_fails_never_loops(http_engine, ops):
    """The 404 page itself is missing: the 404 text, not a loop or a 500
    (while the 405 page, which is there, is served)."""
    def check(pages):
        with http_engine.spawn(error_pages=pages + ",405=/ops/err/405.html") as srv:
            r = get(srv.port, "/nope")
            assert r.status == 404 and r.body == b"404 Not Found\n"
            with Conn(srv.port) as c:
                c.send(b"PUT /a.txt HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
                r = c.read_response()
            assert r.status == 405 and r.body == PAGE_405
    check("404=/ops/err/none.html")
    # the page is outside the root: the original status's text
    check("404=/linkdir-out/secret.txt")


# ---- long directory names ----

def raw_get(port, target):
    with Conn(port) as c:
        c.send(b"GET " + target.encode() + b" HTTP/1.1\r\nHost: h\r\n\r\n")
        return c.read_response()


def test_redirect_too_long_for_location_is_414(http_engine, ops):
    """The Location would be longer than the planner's bound: a planned 414,
    never a wrong Location or a close without an answer."""
    long_ok = "/ops/" + "/".join([FITS] * 3)
    r = raw_get(http_engine.port, long_ok + "?q=1")
    assert r.status == 301
    assert r.header("Location") == long_ok + "/?q=1"
    target = "/ops/" + urllib.parse.quote(LONG) + "/" + urllib.parse.quote(LONG)
    r = raw_get(http_engine.port, target)
    assert r.status == 414, r
    assert r.body == b"414 URI Too Long\n"
    assert r.header("Location") is None
    # with the slash the directory is there
    r = raw_get(http_engine.port, target + "/")
    assert r.status == 200 and r.header("Content-Type").startswith("text/html")


# ---- mime.types (user engines; khttpd keeps the built-in table) ----

def test_mime_types_file(http_engine, ops, tmp_path):
    mt = tmp_path / "mime.types"
    mt.write_text("# a comment\n"
                  "application/x-weird\tweird  # trailing comment\n"
                  "not-a-type weird2\n"
                  "text/x-first mjs\n"
                  "text/x-second mjs\n"
                  "bad/type/x foo\n"
                  "\n")
    with http_engine.spawn(mime_types=str(mt)) as srv:
        r = get(srv.port, "/ops/f.weird")
        assert r.header("Content-Type") == "application/x-weird"
        # the first line naming an extension wins; text/ gets the charset
        r = get(srv.port, "/ops/f.mjs")
        assert r.header("Content-Type") == "text/x-first; charset=utf-8"
        # not listed: the built-in table
        r = get(srv.port, "/image.png")
        assert r.header("Content-Type") == "image/png"
    with http_engine.spawn(mime_types=str(tmp_path / "none")) as srv:
        r = get(srv.port, "/ops/f.weird")
        assert r.status == 200
        assert r.header("Content-Type") == "application/octet-stream"
        assert get(srv.port, "/ops/f.mjs").header("Content-Type") \
            == "text/javascript; charset=utf-8"


def test_mime_types_file_is_bounded(http_engine, ops, tmp_path):
    """At most 8192 extensions and the first 1 MiB are read; the rest is
    left to the built-in table, and the server says so."""
    ops.put("ops/f.x00001", b"1\n")
    ops.put("ops/f.x09000", b"2\n")
    ops.put("ops/f.late", b"3\n")
    lines = [f"application/x-n{i} x{i:05d}\n" for i in range(1, 9001)]
    text = "".join(lines)
    text += "#" * (1024 * 1024 - len(text)) + "\napplication/x-late late\n"
    mt = tmp_path / "big.types"
    mt.write_text(text)
    with http_engine.spawn(mime_types=str(mt)) as srv:
        assert get(srv.port, "/ops/f.x00001").header("Content-Type") == "application/x-n1"
        # beyond the table's bound, beyond the bytes read
        assert get(srv.port, "/ops/f.x09000").header("Content-Type") == "application/octet-stream"
        assert get(srv.port, "/ops/f.late").header("Content-Type") == "application/octet-stream"
        assert get(srv.port, "/page.html").header("Content-Type") == "text/html; charset=utf-8"
        err = open(srv.stderr_path).read()
    assert "only its first 1048576 bytes are read" in err, err
