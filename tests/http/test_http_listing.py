"""Directory listings: streamed with chunked coding, every name escaped in
the text and percent-encoded in the link, large directories complete."""
import html
import os
import re
import time
import urllib.parse

from docroot import MANY, SPECIAL_NAMES
from rawhttp import Conn, get

HREF = re.compile(r'href="([^"]*)"')


def test_listing_chunked_and_complete(http_engine):
    r = get(http_engine.port, "/many/")
    assert r.status == 200
    assert r.header("Transfer-Encoding") == "chunked"
    assert r.header("Content-Type").startswith("text/html")
    text = r.body.decode()
    hrefs = set(HREF.findall(text))
    for i in range(MANY):
        assert f"entry-{i:05d}.txt" in hrefs or f"./entry-{i:05d}.txt" in hrefs, i
    assert text.rstrip().endswith("</html>")


def test_listing_escapes_names(http_engine):
    r = get(http_engine.port, "/names/")
    assert r.status == 200
    text = r.body.decode("utf-8")
    hrefs = [urllib.parse.unquote(h.removeprefix("./")) for h in HREF.findall(text)]
    for name in SPECIAL_NAMES:
        assert html.escape(name, quote=True) in text or \
            html.escape(name, quote=False).replace('"', "&quot;").replace("'", "&#39;") in text, name
        assert name in hrefs, name
    # no raw specials leaked into the markup
    assert "<b>" not in text
    for h in HREF.findall(text):
        assert not set(h) & set(" <>\"'"), h
        assert "#" not in h and "?" not in h, h


def test_listing_links_work(http_engine):
    r = get(http_engine.port, "/names/")
    for h in HREF.findall(r.body.decode()):
        if h in ("../", "./../"):
            continue
        target = "/names/" + h.removeprefix("./")
        got = get(http_engine.port, target)
        assert got.status == 200, target
        name = urllib.parse.unquote(h.removeprefix("./"))
        assert got.body == name.encode() + b"\n"


def test_listing_parent_link(http_engine):
    text = get(http_engine.port, "/sub/").body.decode()
    assert any(h.endswith("../") for h in HREF.findall(text))
    assert "inner.txt" in text


def test_listing_head(http_engine):
    with Conn(http_engine.port) as c:
        c.send(b"HEAD /many/ HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        h = c.read_response("HEAD")
        assert h.status == 200 and h.header("Transfer-Encoding") == "chunked"
        r = c.read_response()
        assert r.status == 200 and r.body == b"hello\n"


def test_listing_http10_no_chunked(http_engine):
    with Conn(http_engine.port) as c:
        c.send(b"GET /sub/ HTTP/1.0\r\n\r\n")
        r = c.read_response()
    assert r.status == 200
    assert r.header("Transfer-Encoding") is None
    assert b"inner.txt" in r.body and r.body.rstrip().endswith(b"</html>")


def test_listings_off_answer_403(http_engine):
    """listings off (ktcp-httpd --listings off, khttpd listings=0): a
    directory without index.html answers 403, one with an index is still
    served, and files are untouched."""
    with http_engine.spawn(listings=False) as srv:
        for target in ("/sub/", "/many/", "/"):
            r = get(srv.port, target)
            assert r.status == 403, target
            assert b"inner.txt" not in r.body and b"<html" not in r.body, target
        with Conn(srv.port) as c:
            # the 403 keeps the connection; HEAD gets it as well
            c.send(b"HEAD /sub/ HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /idx/ HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /sub/inner.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.read_response("HEAD").status == 403
            r = c.read_response()
            assert r.status == 200 and r.header("Content-Type").startswith("text/html")
            assert r.header("Transfer-Encoding") is None  # the index file
            assert c.read_response().status == 200
    with http_engine.spawn(listings=True) as srv:
        assert get(srv.port, "/sub/").status == 200


def test_listing_beyond_its_budget_is_503(http_engine):
    """listing_bytes (khttpd's parameter, ktcp-httpd's --listing-bytes) too
    small for the biggest name table: that listing is 503 with
    Retry-After, counted in listings_refused, and charges nothing after;
    a small directory still lists, files are served."""
    with http_engine.spawn(listing_bytes=64 * 1024, status_path="/_status") as srv:
        r = get(srv.port, "/crowded/")
        assert r.status == 503, r.status
        assert r.header("Retry-After") == "1"
        assert r.body == b"503 Service Unavailable\n"
        r = get(srv.port, "/sub/")
        assert r.status == 200 and b"inner.txt" in r.body
        assert get(srv.port, "/a.txt").body == b"hello\n"
        deadline = time.monotonic() + 5
        while True:
            c = srv.counters()
            if c["listing_bytes"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert c["listings_refused"] == 1 and c["listing_bytes"] == 0, c


def test_listing_table_built_once_and_fresh(http_engine):
    """A directory's sorted name table is built once per version and kept
    in the content cache (counted in cache_bytes) for every later listing;
    a name added or removed shows at once."""
    with http_engine.spawn(status_path="/_status") as srv:
        first = get(srv.port, "/many/")
        assert first.status == 200
        c1 = srv.counters()
        # 10,000 names of 16 bytes and their offsets: one table, cached
        assert c1["cache_bytes"] > MANY * 20, c1
        for _ in range(3):
            assert get(srv.port, "/many/").body == first.body
        deadline = time.monotonic() + 5
        while True:  # the last listing lets go just after its last byte
            c2 = srv.counters()
            if c2["listing_bytes"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert c2["listing_bytes"] == 0, c2
        assert c2["cache_bytes"] == c1["cache_bytes"], (c1, c2)
        added = os.path.join(http_engine.root, "sub", "zz-new.txt")
        with open(added, "w") as f:
            f.write("new\n")
        try:
            text = get(srv.port, "/sub/").body.decode()
            assert "inner.txt" in text and "zz-new.txt" in text
        finally:
            os.unlink(added)
        text = get(srv.port, "/sub/").body.decode()
        assert "inner.txt" in text and "zz-new.txt" not in text
