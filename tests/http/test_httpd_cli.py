"""ktcp-httpd's command line: --help, defaults, unusable arguments named,
the access log. User-space only."""
import os
import subprocess

import pytest

from testlib import require_kind
from engines import HTTPD_BIN, UserHttpd
from rawhttp import get

FLAGS = ["--root", "--port", "--bind", "--threads", "--model", "--idle-timeout-ms",
         "--max-conns", "--backlog", "--gzip", "--no-gzip", "--cache-size", "--access-log",
         "--help", "--gzip-static", "--no-gzip-static", "--expires", "--error-page",
         "--mime-types", "--allow", "--deny", "--limit-req", "--open-files"]


@pytest.fixture(autouse=True)
def _user_only():
    require_kind("user")


def httpd(*args):
    return subprocess.run([HTTPD_BIN, *args], capture_output=True, text=True, timeout=10)


def test_help_lists_every_flag_with_default():
    r = httpd("--help")
    assert r.returncode == 0
    for flag in FLAGS:
        assert flag in r.stdout, flag
    assert "8081" in r.stdout and "default" in r.stdout
    # the operator features' defaults
    for text in ("(default: --no-gzip-static)", "0 = off", "(default: 0)",
                 "(default: none, built-in", "(default: /etc/mime.types)"):
        assert text in r.stdout, text


@pytest.mark.parametrize("args,named", [
    (["--root", "/nope"], "--root /nope: No such file or directory"),
    (["--port", "99999"], "--port 99999"),
    (["--port", "http"], "--port http"),
    (["--port", "0"], "--port 0: expected a number in 1..65535"),  # as every server
    (["--model", "fibers"], "--model fibers"),
    (["--threads", "0"], "--threads 0"),
    (["--cache-size", "12Q"], "--cache-size 12Q"),
    (["--open-files", "-1"], "--open-files -1"),
    (["--idle-timeout-ms", "-5"], "--idle-timeout-ms -5"),
    (["--idle-timeout", "-5"], "--idle-timeout-ms -5"),  # the old spelling, still accepted
    (["-i", "-5"], "--idle-timeout-ms -5"),
    (["--backlog", "0"], "--backlog 0"),
    (["-c", "many"], "--max-conns many"),
    (["--bind", "localhost"], "--bind localhost"),
    (["--access-log", "/nonexistent-dir/log"], "--access-log /nonexistent-dir/log"),
    (["--expires", "-1"], "--expires -1"),
    (["--expires", "999999999999"], "--expires 999999999999"),
    (["--error-page", "404"], "--error-page 404: expected CODE=/path"),
    (["--error-page", "200=/a.txt"], "--error-page 200=/a.txt"),
    (["--error-page", "404=a.txt"], "--error-page 404=a.txt: expected a file's path"),
    (["--error-page", "404=/../x"], "--error-page 404=/../x"),
    (["--mime-types", "/"], "--mime-types /"),
])
def test_unusable_argument_named(docroot, args, named):
    from testlib import free_port
    r = httpd("--root", docroot.root, "--port", str(free_port()), *args)
    assert r.returncode != 0
    assert named in r.stderr, r.stderr


def test_default_bind_is_every_address(docroot):
    """Without --bind the server listens on every address, IPv6 and IPv4, as
    the modules do (docs/operating.md, Flags), and names an IPv4 client of
    that dual-stack listener as IPv4."""
    import socket
    from testlib import free_port, wait_port
    port = free_port()
    p = subprocess.Popen([HTTPD_BIN, "--root", docroot.root, "--port", str(port),
                          "--threads", "1", "--access-log", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, proc=p)
        assert get(port, "/a.txt").status == 200
        if socket.has_ipv6:
            try:
                s6 = socket.create_connection(("::1", port), timeout=5)
            except OSError as e:
                if e.errno in (97, 99):  # no IPv6 on this machine
                    s6 = None
                else:
                    raise
            if s6:
                s6.sendall(b"GET /a.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                assert s6.recv(100).startswith(b"HTTP/1.1 200")
                s6.close()
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert "every address" in err, err
    assert out.startswith("127.0.0.1 "), out


def test_old_and_new_flag_spellings_agree(docroot):
    """--idle-timeout (the old spelling) and --idle-timeout-ms are one flag,
    and -i/-c are the short forms of --idle-timeout-ms/--max-conns, as in
    ktcp-echo."""
    for args in (["--idle-timeout", "300"], ["--idle-timeout-ms", "300"], ["-i", "300"]):
        r = httpd(*args, "--root", docroot.root, "--port", "99999")
        # the bad port, last, is named: everything before it was accepted
        assert "--port 99999" in r.stderr and "idle" not in r.stderr, r.stderr
    r = httpd("-c", "5", "--backlog", "64", "--root", docroot.root, "--port", "99999")
    assert "--port 99999" in r.stderr and "max-conns" not in r.stderr, r.stderr


def test_port_in_use(docroot):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        r = httpd("--root", docroot.root, "--port", str(port))
        assert r.returncode != 0
        assert "Address already in use" in r.stderr
    finally:
        s.close()


@pytest.mark.parametrize("model", ["threads", "epoll", "mn"])
def test_access_log(docroot, tmp_path, model):
    log = tmp_path / "access.log"
    srv = UserHttpd(model, str(tmp_path)).start(docroot.root, access_log=str(log))
    try:
        assert get(srv.port, "/a.txt").status == 200
        assert get(srv.port, "/nope").status == 404
    finally:
        srv.stop()
    lines = log.read_text().splitlines()
    # the readiness probe connects without a request: no line for it
    assert len(lines) == 2, lines
    # two connections may be served by two workers, each with its own buffer
    lines.sort(key=lambda l: "/nope" in l)
    assert '"GET /a.txt HTTP/1.1" 200 6' in lines[0]
    assert '"GET /nope HTTP/1.1" 404' in lines[1]
    assert all(l.startswith("127.0.0.1 ") for l in lines)
