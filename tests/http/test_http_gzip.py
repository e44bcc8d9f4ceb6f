"""gzip: only when accepted (q=0 respected), decodes to the original, Vary
on compressible resources, never for incompressible types."""
import gzip

import pytest

from rawhttp import get


@pytest.mark.parametrize("name", ["text.txt", "page.html", "style.css"])
def test_gzip_decodes_to_original(http_engine, docroot, name):
    r = get(http_engine.port, "/" + name, [("Accept-Encoding", "gzip, deflate")])
    assert r.status == 200
    assert r.header("Content-Encoding") == "gzip"
    assert r.header("Vary") == "Accept-Encoding"
    assert int(r.header("Content-Length")) == len(r.body) < len(docroot.read(name))
    assert gzip.decompress(r.body) == docroot.read(name)


@pytest.mark.parametrize("ae", [None, "identity", "gzip;q=0", "br", "*;q=0, identity",
                                "gzip;q=0.000, identity;q=1"])
def test_identity_unless_gzip_accepted(http_engine, docroot, ae):
    hdrs = [("Accept-Encoding", ae)] if ae is not None else []
    r = get(http_engine.port, "/text.txt", hdrs)
    assert r.status == 200
    assert r.header("Content-Encoding") is None
    assert r.body == docroot.read("text.txt")
    assert r.header("Vary") == "Accept-Encoding"


@pytest.mark.parametrize("ae", ["gzip;q=0.5, identity;q=0.1", "*", "x-gzip", "GZIP", "deflate, gzip;q=1.0"])
def test_gzip_accepted_forms(http_engine, docroot, ae):
    r = get(http_engine.port, "/text.txt", [("Accept-Encoding", ae)])
    assert r.header("Content-Encoding") == "gzip", ae
    assert gzip.decompress(r.body) == docroot.read("text.txt")


def test_incompressible_not_gzipped(http_engine):
    r = get(http_engine.port, "/mib.bin", [("Accept-Encoding", "gzip")])
    assert r.header("Content-Encoding") is None
    assert r.header("Vary") is None
    r = get(http_engine.port, "/image.png", [("Accept-Encoding", "gzip")])
    assert r.header("Content-Encoding") is None


def test_gzip_etag_differs_and_304(http_engine):
    plain = get(http_engine.port, "/text.txt")
    gz = get(http_engine.port, "/text.txt", [("Accept-Encoding", "gzip")])
    assert plain.header("ETag") != gz.header("ETag")
    r = get(http_engine.port, "/text.txt",
            [("Accept-Encoding", "gzip"), ("If-None-Match", gz.header("ETag"))])
    assert r.status == 304


def test_gzip_head_matches_get(http_engine):
    h = get(http_engine.port, "/text.txt", [("Accept-Encoding", "gzip")], method="HEAD")
    g = get(http_engine.port, "/text.txt", [("Accept-Encoding", "gzip")])
    assert h.header("Content-Length") == g.header("Content-Length")
    assert h.header("Content-Encoding") == "gzip" and h.body == b""


def test_no_gzip_option(http_engine, docroot):
    with http_engine.spawn(gzip=False) as srv:
        r = get(srv.port, "/text.txt", [("Accept-Encoding", "gzip")])
    assert r.header("Content-Encoding") is None
    assert r.body == docroot.read("text.txt")


def test_no_cache_means_identity_not_per_request_gzip(http_engine, docroot):
    """A gzip copy lives in the cache; with no room for it the server sends
    identity rather than compressing for every request."""
    with http_engine.spawn(cache_size=0) as srv:
        for _ in range(2):
            r = get(srv.port, "/text.txt", [("Accept-Encoding", "gzip")])
            assert r.status == 200
            assert r.header("Content-Encoding") is None
            assert r.body == docroot.read("text.txt")
        r = get(srv.port, "/mib.bin")
        assert r.body == docroot.read("mib.bin")
