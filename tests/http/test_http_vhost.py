"""Virtual hosts (nginx's server_name): a `host NAME` line of a settings
file (ktcp-httpd's --config and --host, khttpd's site= file) opens a
block whose root, error-page, index, fallback, add-header and cors lines
apply to requests whose Host is NAME (or ends in .SUFFIX for *.SUFFIX);
the port, case and a trailing dot of Host are ignored, IP literals and
unknown names get the default site. Core's http_vhosts picks the site for
both servers. The content cache is keyed by the site: a file cached for
one host is never served for another. The same file is given to every
engine (site=); the checks of a bad host: ktcp-httpd's command line, and
khttpd's site= file refused at load."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from engines.base import EngineError
from engines.httpd import HTTPD_BIN
from rawhttp import request
from testlib import httpd_refuses


def get_host(port, path, host, headers=()):
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}"] + [f"{k}: {v}" for k, v in headers]
    return request(port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


@pytest.fixture
def sites():
    d = tempfile.mkdtemp(prefix="ktcp-vhost-")
    for name, text in (("a", b"site A\n"), ("b", b"site B\n")):
        os.makedirs(os.path.join(d, name, "app"))
        with open(os.path.join(d, name, "same.txt"), "wb") as f:
            f.write(text)
        with open(os.path.join(d, name, "app", "index.html"), "wb") as f:
            f.write(b"<p>app " + name.encode() + b"</p>\n")
    with open(os.path.join(d, "b", "404.html"), "wb") as f:
        f.write(b"B's 404\n")
    os.chmod(d, 0o755)
    for root, dirs, files in os.walk(d):
        for x in dirs:
            os.chmod(os.path.join(root, x), 0o755)
        for x in files:
            os.chmod(os.path.join(root, x), 0o644)
    yield d
    shutil.rmtree(d)


def lines(*rows):
    return "\n".join(rows) + "\n"


def test_hosts_and_their_roots(http_engine, sites, khttpd_modes):
    """Also on khttpd's kthread mode: the suite's khttpd runs on the
    workqueue, and the host is chosen in the same shared path."""
    site = lines("add-header X-Site: default",
                 "host a.example", f"root {sites}/a", "add-header X-Site: a", "cors *",
                 "host *.b.example", f"root {sites}/b", "error-page 404=/404.html",
                 "fallback /app/index.html", "add-header /app/ X-App: b")
    with http_engine.spawn(site=site, **khttpd_modes) as srv:
        for host in ("a.example", "A.EXAMPLE", "a.example.", f"a.example:{srv.port}",
                     "A.Example.:80"):
            r = get_host(srv.port, "/same.txt", host)
            assert r.status == 200 and r.body == b"site A\n", host
            assert r.header("X-Site") == "a" and r.header("Access-Control-Allow-Origin") == "*"
        for host in ("www.b.example", "x.y.b.example:8080", "WWW.B.EXAMPLE."):
            r = get_host(srv.port, "/same.txt", host)
            assert r.status == 200 and r.body == b"site B\n", host
            assert r.header("X-Site") is None and r.header("Access-Control-Allow-Origin") is None
            r = get_host(srv.port, "/deep/route", host)  # its fallback
            assert r.status == 200 and r.body == b"<p>app b</p>\n"
            assert r.header("X-App") is None
            assert get_host(srv.port, "/app/", host).header("X-App") == "b"
            r = get_host(srv.port, "/.env", host)  # its error page
            assert r.status == 404 and r.body == b"B's 404\n"
        # the default: IP literals, unknown names, a wildcard's suffix alone
        for host in ("127.0.0.1", f"127.0.0.1:{srv.port}", "[::1]", "[::1]:80", "other.example",
                     "b.example", "localhost"):
            r = get_host(srv.port, "/a.txt", host)
            assert r.status == 200 and r.body == b"hello\n", host
            assert r.header("X-Site") == "default", host
            assert get_host(srv.port, "/same.txt", host).status == 404, host
        # a real client: curl --resolve
        if shutil.which("curl") and not http_engine.tls:
            for name, want in (("a.example", b"site A\n"), ("www.b.example", b"site B\n")):
                out = subprocess.run(
                    ["curl", "-sS", "--max-time", "10", "--resolve",
                     f"{name}:{srv.port}:127.0.0.1", f"http://{name}:{srv.port}/same.txt"],
                    capture_output=True, timeout=20, check=True).stdout
                assert out == want, name


def test_cache_keeps_hosts_apart(http_engine, sites):
    """The same path in two roots, asked alternately on one connection and
    on fresh ones, each many times: never the other's bytes or ETag."""
    site = lines("host a.example", f"root {sites}/a", "host b.example", f"root {sites}/b")
    with http_engine.spawn(site=site) as srv:
        tags = {}
        for i in range(10):
            for host, want in (("a.example", b"site A\n"), ("b.example", b"site B\n")):
                r = get_host(srv.port, "/same.txt", host, [("Accept-Encoding", "gzip")])
                assert r.status == 200 and r.body == want, (i, host)
                tags.setdefault(host, r.header("ETag"))
                assert r.header("ETag") == tags[host]
                # a revalidation with the other host's ETag is no 304
                other = "b.example" if host == "a.example" else "a.example"
                if other in tags:
                    r = get_host(srv.port, "/same.txt", host,
                                 [("If-None-Match", tags[other])])
                    assert r.status == 200 and r.body == want
        assert tags["a.example"] != tags["b.example"]
        # listings too: each host's root lists its own names
        for i in range(3):
            la, lb = get_host(srv.port, "/", "a.example"), get_host(srv.port, "/", "b.example")
            assert la.status == 200 and lb.status == 200, i
            assert b"404.html" in lb.body and b"404.html" not in la.body, i


BAD = [["--host", "127.0.0.1", "--root", "/"], ["--host", "a.example"],
       ["--host", "a.example:80", "--root", "/"], ["--host", "x y", "--root", "/"],
       ["--host", "a.example", "--root", "/", "--host", "A.example.", "--root", "/"]]


@pytest.mark.parametrize("bad", BAD, ids=["ip", "no-root", "port", "blank", "twice"])
def test_bad_host_refused(bad):
    if not os.access(HTTPD_BIN, os.X_OK):
        pytest.skip("ktcp-httpd not built")
    assert "--host" in httpd_refuses("--root", "/tmp", *bad)


def test_bad_host_block_refused_at_load(http_engine, sites):
    """khttpd: every bad host block fails the load with a line in the log
    saying why, and nothing stays loaded (the next load serves). The
    file is read before the listener exists: the plain engine stands for
    the TLS ones."""
    if http_engine.name != "khttpd":
        pytest.skip("khttpd's site= file, on the plain engine (ktcp-httpd's: "
                    "test_bad_host_refused)")
    bad = [(lines("host 127.0.0.1", f"root {sites}/a"), "expected a host name"),
           (lines("host a.example"), "host a.example: needs a root line"),
           (lines("host a.example", "root a"), "an absolute path"),
           (lines("host a.example", f"root {sites}/missing"), "no such directory"),
           (lines("host a.example", "root /"), "the whole file system is not served"),
           (lines(f"root {sites}/a"), "only after a host line"),
           (lines("host a.example", f"root {sites}/a", "host A.example.", f"root {sites}/b"),
            "host name given twice"),
           (lines(*[f"host h{i}.example\nroot {sites}/a" for i in range(65)]),
            "too many host names (at most 64)"),
           (lines("host a.example", f"root {sites}/a", "add-header X-A"), "add-header")]
    for site, message in bad:
        with pytest.raises(EngineError):
            with http_engine.spawn(site=site):
                pass
        log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout[-2000:]
        assert message in log, (site, log)
    # the most a file may hold loads and serves each host's root
    site = lines(*[f"host h{i}.example\nroot {sites}/{'ab'[i % 2]}" for i in range(64)])
    with http_engine.spawn(site=site) as srv:
        assert get_host(srv.port, "/same.txt", "h63.example").body == b"site B\n"
        assert get_host(srv.port, "/same.txt", "h0.example").body == b"site A\n"
        assert get_host(srv.port, "/a.txt", "h64.example").body == b"hello\n"
    assert get_host(http_engine.port, "/a.txt", "localhost").status == 200


def test_hosts_reloaded_on_sighup(http_engine, sites):
    if http_engine.kind != "user":
        pytest.skip("khttpd reads its site= file at load only")
    conf = os.path.join(sites, "site.conf")
    with open(conf, "w") as f:
        f.write(f"host a.example\nroot {sites}/a\n")
    os.chmod(conf, 0o644)
    with http_engine.spawn(args=["--config", conf]) as srv:
        assert get_host(srv.port, "/same.txt", "a.example").body == b"site A\n"
        assert get_host(srv.port, "/same.txt", "b.example").status == 404
        with open(conf, "w") as f:
            f.write(f"host a.example\nroot {sites}/b\nhost b.example\nroot {sites}/a\n")
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while get_host(srv.port, "/same.txt", "b.example").body != b"site A\n":
            assert time.monotonic() < deadline, "the reload"
            time.sleep(0.05)
        assert get_host(srv.port, "/same.txt", "a.example").body == b"site B\n"
        # a host whose root cannot be opened: the running sites stay
        with open(conf, "w") as f:
            f.write(f"host a.example\nroot {sites}/missing\n")
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert get_host(srv.port, "/same.txt", "a.example").body == b"site B\n"
