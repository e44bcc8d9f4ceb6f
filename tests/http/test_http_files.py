"""Static files: bodies byte-exact, types, validators, 304/206/416, HEAD,
redirects, index files, symlinks, cache invalidation."""
import email.utils
import http.client
import os
import time

import pytest

from engines import tlscert
from rawhttp import Conn, get


def client_get(port, path, headers=None, method="GET"):
    ctx = tlscert.context_for(port)
    if ctx:  # a TLS engine: Python's own HTTPS client
        c = http.client.HTTPSConnection("localhost", port, timeout=10, context=ctx)
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        c.close()


def test_small_file_exact(http_engine, docroot):
    r = get(http_engine.port, "/a.txt")
    assert r.head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert r.body == b"hello\n"
    assert r.header("Content-Length") == "6"
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    st = os.stat(os.path.join(docroot.root, "a.txt"))
    assert r.header("Last-Modified") == email.utils.formatdate(int(st.st_mtime), usegmt=True)
    assert r.header("ETag").startswith('"') and r.header("ETag").endswith('"')
    date = email.utils.parsedate_to_datetime(r.header("Date"))
    assert abs(date.timestamp() - time.time()) < 5


@pytest.mark.parametrize("name", ["bytes.bin", "mib.bin", "large.bin", "empty.txt"])
def test_binary_bodies_byte_exact(http_engine, docroot, name):
    status, headers, body = client_get(http_engine.port, "/" + name)
    assert status == 200
    assert body == docroot.read(name)
    assert int(headers["Content-Length"]) == len(body)
    assert headers.get("Content-Encoding") is None


@pytest.mark.parametrize("name,ctype", [
    ("page.html", "text/html"), ("style.css", "text/css"),
    ("data.json", "application/json"), ("image.png", "image/png"),
    ("mib.bin", "application/octet-stream")])
def test_content_type(http_engine, name, ctype):
    status, headers, _ = client_get(http_engine.port, "/" + name)
    assert status == 200
    assert headers["Content-Type"].split(";")[0] == ctype


@pytest.mark.parametrize("name", ["a.txt", "mib.bin", "text.txt"])
def test_head_same_headers_no_body(http_engine, name):
    with Conn(http_engine.port) as c:
        c.send(f"HEAD /{name} HTTP/1.1\r\nHost: x\r\n\r\n"
               f"GET /{name} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = c.read_response("HEAD")
        get_ = c.read_response("GET")  # would misparse if HEAD sent a body
    assert head.status == get_.status == 200
    strip = lambda r: [(k, v) for k, v in r.headers if k.lower() != "date"]
    assert strip(head) == strip(get_)
    assert head.body == b""
    assert int(get_.header("Content-Length")) == len(get_.body)


def test_404_exact(http_engine):
    r = get(http_engine.port, "/no-such-file.txt")
    assert r.head.startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert int(r.header("Content-Length")) == len(r.body)


def test_304_if_none_match(http_engine):
    r = get(http_engine.port, "/a.txt")
    etag = r.header("ETag")
    r2 = get(http_engine.port, "/a.txt", [("If-None-Match", etag)])
    assert r2.head.startswith(b"HTTP/1.1 304 Not Modified\r\n")
    assert r2.header("ETag") == etag
    assert r2.header("Content-Length") is None and r2.body == b""
    r3 = get(http_engine.port, "/a.txt", [("If-None-Match", '"other", ' + etag)])
    assert r3.status == 304
    r4 = get(http_engine.port, "/a.txt", [("If-None-Match", '"nope"')])
    assert r4.status == 200 and r4.body == b"hello\n"


def test_304_if_modified_since(http_engine):
    r = get(http_engine.port, "/a.txt")
    lm = r.header("Last-Modified")
    assert get(http_engine.port, "/a.txt", [("If-Modified-Since", lm)]).status == 304
    old = "Sun, 06 Nov 1994 08:49:37 GMT"
    r2 = get(http_engine.port, "/a.txt", [("If-Modified-Since", old)])
    assert r2.status == 200 and r2.body == b"hello\n"
    # If-None-Match decides alone when present
    r3 = get(http_engine.port, "/a.txt", [("If-None-Match", '"nope"'), ("If-Modified-Since", lm)])
    assert r3.status == 200


def test_206_range_exact(http_engine, docroot):
    data = docroot.read("mib.bin")
    r = get(http_engine.port, "/mib.bin", [("Range", "bytes=100-199")])
    assert r.head.startswith(b"HTTP/1.1 206 Partial Content\r\n")
    assert r.header("Content-Range") == f"bytes 100-199/{len(data)}"
    assert r.header("Content-Length") == "100"
    assert r.body == data[100:200]
    r = get(http_engine.port, "/mib.bin", [("Range", "bytes=-10")])
    assert r.status == 206 and r.body == data[-10:]
    assert r.header("Content-Range") == f"bytes {len(data) - 10}-{len(data) - 1}/{len(data)}"
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=2-")])
    assert r.status == 206 and r.body == b"llo\n"
    assert r.header("Content-Range") == "bytes 2-5/6"
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=4-100")])
    assert r.status == 206 and r.body == b"o\n"


def test_416_exact(http_engine):
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=6-")])
    assert r.head.startswith(b"HTTP/1.1 416 Range Not Satisfiable\r\n")
    assert r.header("Content-Range") == "bytes */6"
    assert r.body == b"" or int(r.header("Content-Length")) == len(r.body)


def test_if_range(http_engine):
    etag = get(http_engine.port, "/a.txt").header("ETag")
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-1"), ("If-Range", etag)])
    assert r.status == 206 and r.body == b"he"
    r = get(http_engine.port, "/a.txt", [("Range", "bytes=0-1"), ("If-Range", '"old"')])
    assert r.status == 200 and r.body == b"hello\n"


def test_directory_redirect(http_engine):
    r = get(http_engine.port, "/sub")
    assert r.head.startswith(b"HTTP/1.1 301 Moved Permanently\r\n")
    assert r.header("Location") == "/sub/"
    r = get(http_engine.port, "/idx?x=1")
    assert r.status == 301 and r.header("Location") == "/idx/?x=1"
    r = get(http_engine.port, "/names")
    assert r.status == 301 and r.header("Location") == "/names/"


def test_index_html(http_engine, docroot):
    r = get(http_engine.port, "/idx/")
    assert r.status == 200
    assert r.body == docroot.read("idx/index.html")
    assert r.header("Content-Type").startswith("text/html")


def test_file_with_trailing_slash_404(http_engine):
    assert get(http_engine.port, "/a.txt/").status == 404


def test_symlink_inside_root_served(http_engine):
    r = get(http_engine.port, "/link-in")
    assert r.status == 200 and r.body == b"hello\n"


def test_query_string_ignored(http_engine):
    r = get(http_engine.port, "/a.txt?v=1&x=%2e%2e")
    assert r.status == 200 and r.body == b"hello\n"


def test_percent_encoded_name(http_engine, docroot):
    r = get(http_engine.port, "/names/with%20space.txt")
    assert r.status == 200 and r.body == b"with space.txt\n"
    r = get(http_engine.port, "/names/caf%C3%A9-%E6%97%A5%E6%9C%AC.txt")
    assert r.status == 200 and r.body == "caf\u00e9-\u65e5\u672c.txt\n".encode()


def test_absolute_form_target(http_engine):
    r = get(http_engine.port, "http://localhost/a.txt")
    assert r.status == 200 and r.body == b"hello\n"


def test_cache_sees_changed_file(http_engine, docroot):
    path = os.path.join(docroot.root, "mutable.txt")
    first = get(http_engine.port, "/mutable.txt")
    assert first.status == 200
    new = f"version {time.time_ns()} {http_engine.name}\n".encode()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(new)
    os.replace(tmp, path)
    deadline = time.monotonic() + 5  # revalidation is at most once a second
    while True:
        r = get(http_engine.port, "/mutable.txt")
        if r.body == new or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.body == new
    assert r.header("ETag") != first.header("ETag") or len(new) == len(first.body)
