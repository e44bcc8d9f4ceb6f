"""Index files: an ordered list of names a directory's index is looked for
under (nginx's "index"), ktcp-httpd --index and khttpd index=; names
that are not one plain path segment are refused at start."""
import os
import signal
import time

import pytest

from engines.base import EngineError
from rawhttp import get
from testlib import httpd_refuses, served_config


@pytest.fixture(scope="module")
def ix(docroot):
    put = docroot.put
    put("ix/htm/index.htm", b"htm\n")
    put("ix/both/index.html", b"html\n")
    put("ix/both/index.htm", b"htm\n")
    put("ix/home/home.html", b"<p>home</p>\n")
    os.makedirs(os.path.join(docroot.root, "ix/home/index.htm"), exist_ok=True)
    put("ix/none/x.txt", b"x\n")
    put("ix/root.txt", b"r\n")
    return docroot


def test_default_is_index_html(http_engine, ix):
    assert get(http_engine.port, "/ix/both/").body == b"html\n"
    r = get(http_engine.port, "/ix/htm/")  # no index.html: the listing
    assert r.status == 200 and b"index.htm" in r.body and r.body != b"htm\n"


def test_index_list_in_order(http_engine, ix, khttpd_modes):
    """Also on khttpd's kthread mode (the suite's khttpd runs on the
    workqueue): the decision is core's, carried out by either."""
    with http_engine.spawn(index="index.htm,index.html,home.html", **khttpd_modes) as srv:
        r = get(srv.port, "/ix/htm/")
        assert r.status == 200 and r.body == b"htm\n"
        assert r.header("Content-Type") == "text/html; charset=utf-8"
        assert r.header("ETag")
        assert get(srv.port, "/ix/both/").body == b"htm\n"  # the first wins
        # a directory named like an index is passed over
        assert get(srv.port, "/ix/home/").body == b"<p>home</p>\n"
        # none of them: the listing as before, or 403 without listings
        r = get(srv.port, "/ix/none/")
        assert r.status == 200 and b"x.txt" in r.body
        assert get(srv.port, "/ix/htm/", method="HEAD").header("Content-Length") == "4"


def test_index_without_listings(http_engine, ix):
    with http_engine.spawn(index="home.html", listings=False) as srv:
        assert get(srv.port, "/ix/home/").body == b"<p>home</p>\n"
        assert get(srv.port, "/ix/both/").status == 403


# (no blanks: insmod's parameters are split at them)
BAD = ["a/b", ".hidden", "..", "", "a,,b", "x" * 64, ",".join(f"i{n}" for n in range(9)), "x/"]


@pytest.mark.parametrize("bad", BAD)
def test_bad_index_refused(http_engine, ix, bad):
    if http_engine.kind == "user":
        assert "--index" in httpd_refuses("--root", ix.root, "--index", bad)
        return
    with pytest.raises(EngineError):
        with http_engine.spawn(index=bad):
            pass
    assert get(http_engine.port, "/a.txt").status == 200  # the shared one is back


def test_index_reloaded_on_sighup(http_engine, ix):
    if http_engine.kind != "user":
        pytest.skip("khttpd's parameters are set at load")
    with served_config("index index.htm\n", "ktcp-ix-") as conf:
        reload_index(http_engine, conf)


def reload_index(http_engine, conf):
    with http_engine.spawn(args=["--config", str(conf)]) as srv:
        assert get(srv.port, "/ix/both/").body == b"htm\n"
        conf.write_text("index home.html,index.html\n")
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while get(srv.port, "/ix/both/").body != b"html\n":
            assert time.monotonic() < deadline, "the reload"
            time.sleep(0.05)
        assert get(srv.port, "/ix/home/").body == b"<p>home</p>\n"
        conf.write_text("")  # back to the default
        srv.proc.send_signal(signal.SIGHUP)
        while get(srv.port, "/ix/home/").body == b"<p>home</p>\n":
            assert time.monotonic() < deadline + 10, "the second reload"
            time.sleep(0.05)
