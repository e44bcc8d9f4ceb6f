"""SPA fallback (nginx's try_files $uri $uri/ /index.html): a missing path
that is not a dotfile and not under /.well-known/ is answered 200 with a
named file and that file's validators; ktcp-httpd --fallback, khttpd
fallback=. Bad paths are refused at start."""
import signal
import time

import pytest

from engines.base import EngineError
from rawhttp import get
from testlib import httpd_refuses, served_config

APP = b"<!doctype html><div id=app></div>\n" * 10


@pytest.fixture(scope="module")
def spa(docroot):
    docroot.put("spa/index.html", APP)
    docroot.put("spa/other.html", b"<p>other</p>\n")
    docroot.put("spa/assets/app.js", b"console.log(1)\n")
    return docroot


def test_missing_path_gets_the_fallback(http_engine, spa, khttpd_modes):
    """Also on khttpd's kthread mode (the suite's khttpd runs on the
    workqueue): the decision is core's, carried out by either."""
    with http_engine.spawn(fallback="/spa/index.html", **khttpd_modes) as srv:
        want = get(srv.port, "/spa/index.html")
        for path in ("/spa/route/deep", "/nope", "/spa/assets/missing.js", "/x?y=1"):
            r = get(srv.port, path)
            assert r.status == 200 and r.body == APP, path
            assert r.header("Content-Type") == "text/html; charset=utf-8"
            assert r.header("ETag") == want.header("ETag")
            assert r.header("Last-Modified") == want.header("Last-Modified")
        # validators hold: a revalidation of the app shell is a 304
        r = get(srv.port, "/spa/route", [("If-None-Match", want.header("ETag"))])
        assert r.status == 304 and r.body == b""
        h = get(srv.port, "/spa/route", method="HEAD")
        assert h.status == 200 and h.header("Content-Length") == str(len(APP))
        # what exists is served as before
        assert get(srv.port, "/spa/other.html").body == b"<p>other</p>\n"
        assert get(srv.port, "/spa/assets/app.js").body == b"console.log(1)\n"
        assert get(srv.port, "/spa/assets").status == 301
        # dotfiles and /.well-known/ keep their 404
        for path in ("/.env", "/spa/.git/config", "/.well-known/acme-challenge/x",
                     "/.well-known/missing"):
            assert get(srv.port, path).status == 404, path
        # a path that is refused stays refused
        assert get(srv.port, "/../etc/passwd").status in (400, 403, 404)
        assert get(srv.port, "/nope", method="POST").status == 405


def test_fallback_that_is_missing_is_404(http_engine, spa):
    with http_engine.spawn(fallback="/spa/gone.html") as srv:
        assert get(srv.port, "/route").status == 404
    with http_engine.spawn(fallback="/spa/missing.html",
                           error_pages="404=/spa/other.html") as srv:
        r = get(srv.port, "/route")
        assert r.status == 404 and r.body == b"<p>other</p>\n"


def test_without_fallback_404(http_engine, spa):
    assert get(http_engine.port, "/spa/route").status == 404


BAD = ["spa/index.html", "/", "/spa/", "/../x", "/.env", "/spa/.x/a.html", "/a?b"]


@pytest.mark.parametrize("bad", BAD)
def test_bad_fallback_refused(http_engine, spa, bad):
    if http_engine.kind == "user":
        assert "--fallback" in httpd_refuses("--root", spa.root, "--fallback", bad)
        return
    with pytest.raises(EngineError):
        with http_engine.spawn(fallback=bad):
            pass
    assert get(http_engine.port, "/a.txt").status == 200


def test_fallback_reloaded_on_sighup(http_engine, spa):
    if http_engine.kind != "user":
        pytest.skip("khttpd's parameters are set at load")
    with served_config("fallback /spa/index.html\n", "ktcp-spa-") as conf:
        with http_engine.spawn(args=["--config", str(conf)]) as srv:
            assert get(srv.port, "/route").body == APP
            conf.write_text("fallback /spa/other.html\nindex other.html\n")
            srv.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while get(srv.port, "/route").body != b"<p>other</p>\n":
                assert time.monotonic() < deadline, "the reload"
                time.sleep(0.05)
            assert get(srv.port, "/spa/").body == b"<p>other</p>\n"
            conf.write_text("")  # off again
            srv.proc.send_signal(signal.SIGHUP)
            while get(srv.port, "/route").status != 404:
                assert time.monotonic() < deadline + 10, "the second reload"
                time.sleep(0.05)
            assert get(srv.port, "/spa/").body == APP
