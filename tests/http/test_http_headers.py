"""Response headers and CORS: fields the operator adds to every response or
to a path prefix (nginx's add_header ... always), at most 32, values with
CR or LF and names that are not tokens refused when the settings are read;
the --cors / cors= shortcut: Access-Control-Allow-Origin (with Vary: Origin
for one origin) and the preflight answered 204. The settings are the same
lines for both engines (ktcp-httpd's --config, khttpd's site= file); curl
is the client where a real one matters."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from engines import tlscert
from engines.base import EngineError
from engines.httpd import HTTPD_BIN
from rawhttp import get
from testlib import httpd_refuses

SITE = """# every response, and the assets' only
add-header X-Frame-Options: DENY
--add-header Strict-Transport-Security: max-age=63072000; includeSubDomains
add-header /idx/ Cache-Control: public, max-age=31536000, immutable
add-header /sub/inner.txt X-Inner: yes
"""


def test_fields_on_every_response_and_a_prefix(http_engine):
    with http_engine.spawn(site=SITE) as srv:
        cases = [("/a.txt", 200), ("/missing", 404), ("/idx", 301), ("/idx/", 200),
                 ("/idx/index.html", 200), ("/sub/", 200), ("/sub/inner.txt", 200),
                 ("/.env", 404), ("/%zz", 400)]
        for path, status in cases:
            for method in ("GET", "HEAD"):
                r = get(srv.port, path, method=method)
                assert r.status == status, (path, method)
                assert r.header("X-Frame-Options") == "DENY", (path, r.headers)
                assert r.header("Strict-Transport-Security") == \
                    "max-age=63072000; includeSubDomains", path
                cc = r.header("Cache-Control")
                if path.startswith("/idx/"):
                    assert cc == "public, max-age=31536000, immutable", path
                else:
                    assert cc is None, path
                assert (r.header("X-Inner") == "yes") == (path == "/sub/inner.txt"), path
        # a revalidation's 304 carries them too (as nginx's "always")
        etag = get(srv.port, "/idx/index.html").header("ETag")
        r = get(srv.port, "/idx/index.html", [("If-None-Match", etag)])
        assert r.status == 304 and r.header("Cache-Control").startswith("public")
        assert r.header("X-Frame-Options") == "DENY"
        # a POST's 405 and OPTIONS (no CORS) keep their answers
        r = get(srv.port, "/a.txt", method="OPTIONS")
        assert r.status == 405 and r.header("Allow") == "GET, HEAD"
        assert r.header("X-Frame-Options") == "DENY"


def test_32_fields(http_engine):
    lines = [f"add-header X-Field-{i:02d}: value {i} " + "v" * 60 for i in range(32)]
    with http_engine.spawn(site="\n".join(lines) + "\n") as srv:
        for path in ("/a.txt", "/page.html", "/missing"):
            r = get(srv.port, path)
            for i in range(32):
                assert r.header(f"X-Field-{i:02d}") == f"value {i} " + "v" * 60, (path, i)
        assert get(srv.port, "/a.txt").body == b"hello\n"
    # a 33rd is refused
    with pytest.raises(EngineError):
        with http_engine.spawn(site="\n".join(lines + ["add-header X-More: 1"]) + "\n"):
            pass
    assert get(http_engine.port, "/a.txt").status == 200


BAD_LINES = ["add-header X-Evil: a\rSet-Cookie: x=1", "add-header Bad Name: x",
             "add-header Content-Length: 5", "add-header X-Empty:", "cors https://a.example/path",
             "add-header /../x X-A: 1"]


@pytest.mark.parametrize("line", BAD_LINES)
def test_bad_field_refused_at_load(http_engine, line):
    if http_engine.kind == "user":
        if http_engine.name != "user-epoll":
            pytest.skip("checked before any model runs: user-epoll stands for all")
        d = tempfile.mkdtemp(prefix="ktcp-hdr-")
        try:
            conf = os.path.join(d, "site.conf")
            with open(conf, "w", newline="") as f:
                f.write(line + "\n")
            r = subprocess.run([HTTPD_BIN, "--root", d, "--port", "1", "--config", conf],
                               capture_output=True, text=True, timeout=10)
            assert r.returncode == 2, r
            assert "--" + line.split()[0] in r.stderr, r.stderr
        finally:
            shutil.rmtree(d)
        return
    with pytest.raises(EngineError):
        with http_engine.spawn(site=line + "\n"):
            pass
    assert get(http_engine.port, "/a.txt").status == 200


def test_crlf_value_refused_on_the_command_line(http_engine):
    if http_engine.name != "user-epoll":
        pytest.skip("ktcp-httpd's flags, checked before any model runs")
    for value in ("X-A: a\r\nSet-Cookie: x=1", "X-A: a\nb"):
        err = httpd_refuses("--root", "/", "--add-header", value)
        assert "--add-header" in err and "CR or LF" in err, err


def curl(port, path, *args):
    """curl's response head (its lines) and body for path."""
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "-D", "-", *args,
                        *tlscert.curl_args(port), tlscert.url(port, path)],
                       capture_output=True, timeout=20, check=True)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n"), body


def field(lines, name):
    vals = [ln.split(":", 1)[1].strip() for ln in lines[1:]
            if ln.split(":", 1)[0].lower() == name.lower()]
    return vals


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_cors(http_engine):
    with http_engine.spawn(cors="https://app.example") as srv:
        head, body = curl(srv.port, "/a.txt", "-H", "Origin: https://app.example")
        assert head[0] == "HTTP/1.1 200 OK" and body == b"hello\n"
        assert field(head, "Access-Control-Allow-Origin") == ["https://app.example"]
        assert "Origin" in field(head, "Vary")
        # the preflight a browser sends before a PUT with a custom field
        head, body = curl(srv.port, "/api/items", "-X", "OPTIONS",
                          "-H", "Origin: https://app.example",
                          "-H", "Access-Control-Request-Method: GET",
                          "-H", "Access-Control-Request-Headers: x-token, content-type")
        assert head[0] == "HTTP/1.1 204 No Content", head
        assert field(head, "Access-Control-Allow-Origin") == ["https://app.example"]
        assert field(head, "Access-Control-Allow-Methods") == ["GET, HEAD"]
        assert field(head, "Access-Control-Allow-Headers") == ["x-token, content-type"]
        assert field(head, "Access-Control-Max-Age") == ["86400"]
        assert field(head, "Content-Length") == [] and body == b""
        # OPTIONS that is no preflight: as before
        assert get(srv.port, "/a.txt", [("Origin", "https://app.example")],
                   method="OPTIONS").status == 405
    with http_engine.spawn(cors="*", site="add-header /idx/ X-Idx: 1\n") as srv:
        head, _ = curl(srv.port, "/idx/", "-H", "Origin: https://other.example")
        assert field(head, "Access-Control-Allow-Origin") == ["*"]
        assert "Origin" not in ",".join(field(head, "Vary"))
        assert field(head, "X-Idx") == ["1"]
        head, _ = curl(srv.port, "/missing")
        assert head[0].startswith("HTTP/1.1 404") and field(head, "Access-Control-Allow-Origin") == ["*"]


def test_fields_reloaded_on_sighup(http_engine):
    if http_engine.kind != "user":
        pytest.skip("khttpd's settings are read at load")
    d = tempfile.mkdtemp(prefix="ktcp-hdr-")
    os.chmod(d, 0o755)
    conf = os.path.join(d, "site.conf")
    try:
        with open(conf, "w") as f:
            f.write("add-header X-Version: 1\n")
        os.chmod(conf, 0o644)
        with http_engine.spawn(args=["--config", conf]) as srv:
            assert get(srv.port, "/a.txt").header("X-Version") == "1"
            with open(conf, "w") as f:
                f.write("add-header X-Version: 2\ncors *\n")
            srv.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while get(srv.port, "/a.txt").header("X-Version") != "2":
                assert time.monotonic() < deadline, "the reload"
                time.sleep(0.05)
            assert get(srv.port, "/a.txt").header("Access-Control-Allow-Origin") == "*"
            # a bad file keeps what runs
            with open(conf, "w") as f:
                f.write("add-header X-Version: 3\nadd-header X-Bad: a\rb\n")
            srv.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            assert get(srv.port, "/a.txt").header("X-Version") == "2"
    finally:
        shutil.rmtree(d)


def test_khttpd_kthread_mode(http_engine):
    """The suite's khttpd runs on the workqueue; the fields and CORS are the
    planner's, so one check in mode=kthread shows that mode carries them."""
    if http_engine.kind != "kernel":
        pytest.skip("khttpd's modes")
    from engines.httpd import KernelHttpd
    http_engine.engine.stop()
    k = KernelHttpd("kthread")
    try:
        k.start(http_engine.root, site="add-header /idx/ X-Idx: 1\n", cors="*")
        r = get(k.port, "/idx/")
        assert r.status == 200 and r.header("X-Idx") == "1"
        assert r.header("Access-Control-Allow-Origin") == "*"
        r = get(k.port, "/a.txt", [("Origin", "https://a.example"),
                                   ("Access-Control-Request-Method", "GET")],
                method="OPTIONS")
        assert r.status == 204 and r.header("Access-Control-Allow-Methods") == "GET, HEAD"
    finally:
        k.stop()
        http_engine.engine.start(http_engine.root)
