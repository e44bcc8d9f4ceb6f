"""What a server exposed to anyone may serve: only what its unprivileged
user may read (403 otherwise, as nginx's worker user gets), no dotfiles
unless allowed (404; /.well-known/ always), and listings that are sorted,
bounded and whole however long their title.

The permission tests need root: the docroot's files belong to the test's
user, and the server must read them as another one (ktcp-httpd started as
root with --user nobody, khttpd with its default uid/gid 65534)."""
import email.utils
import html
import os
import re
import subprocess
import time
import urllib.parse

import pytest

from docroot import (CROWDED, LISTING_MAX_ENTRIES, LONG_DIR, LONG_SEGMENT,
                     SORTED, SORTED_DIRS)
from engines import HTTPD_BIN
from rawhttp import Conn, get
from testlib import free_port

ROW = re.compile(r'<tr><td><a href="([^"]*)">[^<]*</a></td><td>([^<]*)</td>'
                 r'<td>([^<]*)</td></tr>')


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: the files must belong to another user than "
                    "the one the server reads them as")


def rows(text):
    """(name, size, date) of each entry row, "../" left out."""
    out = []
    for href, size, date in ROW.findall(text):
        if href in ("../", "./../"):
            continue
        out.append((urllib.parse.unquote(href.removeprefix("./")), size, date))
    return out


# ---- permissions ----

def test_file_the_user_cannot_read_is_403(http_engine):
    need_root()
    for method in ("GET", "HEAD"):
        r = get(http_engine.port, "/perm/private.txt", method=method)
        assert r.status == 403, method
        assert b"private" not in r.body
    # twice: a cached entry must not serve it either
    assert get(http_engine.port, "/perm/private.txt").status == 403
    # beside it, what the user may read is served
    r = get(http_engine.port, "/perm/public.txt")
    assert r.status == 200 and r.body == b"public\n"


def test_directory_the_user_cannot_enter_is_403(http_engine):
    need_root()
    for path in ("/perm/closed/", "/perm/closed/inner.txt", "/perm/closed"):
        r = get(http_engine.port, path)
        assert r.status == 403, path
        assert b"inner" not in r.body and b"closed\n" != r.body, path


def test_directory_the_user_can_enter_but_not_read(http_engine):
    """0711: the user may open what it names but not list it, as nginx's
    worker gets: its index and files are served, a listing is 403."""
    need_root()
    r = get(http_engine.port, "/perm/search/")
    assert r.status == 200 and r.body == b"searchable index\n"
    r = get(http_engine.port, "/perm/search/file.txt")
    assert r.status == 200 and r.body == b"searchable file\n"
    r = get(http_engine.port, "/perm/search/bare/inner.txt")
    assert r.status == 200 and r.body == b"bare inner\n"
    r = get(http_engine.port, "/perm/search")
    assert r.status == 301, "a directory without its slash is redirected"
    for path in ("/perm/search/bare/", "/perm/search/bare/"):  # twice: cached
        r = get(http_engine.port, path)
        assert r.status == 403, path
        assert b"inner.txt" not in r.body


def test_permission_taken_away_from_a_cached_file(http_engine):
    need_root()
    path = os.path.join(http_engine.root, "perm/later.txt")
    os.chmod(path, 0o644)
    try:
        for _ in range(2):  # cached now
            r = get(http_engine.port, "/perm/later.txt")
            assert r.status == 200 and r.body == b"later\n"
        os.chmod(path, 0o600)
        # a cached entry is checked against the file system once a second
        deadline = time.monotonic() + 5
        while get(http_engine.port, "/perm/later.txt").status == 200:
            assert time.monotonic() < deadline, "still served after chmod 600"
            time.sleep(0.2)
        assert get(http_engine.port, "/perm/later.txt").status == 403
    finally:
        os.chmod(path, 0o644)


def test_user_drops_privileges(http_engine):
    need_root()
    if http_engine.kind != "user":
        pytest.skip("a module has no process: the 403 tests check its "
                    "credential")
    pid = http_engine.engine.proc.pid
    status = dict(line.split(":", 1) for line in
                  open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    assert status["Uid"].split() == ["65534"] * 4, status["Uid"]
    assert status["Gid"].split() == ["65534"] * 4, status["Gid"]
    assert status["Groups"].split() == [], status["Groups"]
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0


def test_unknown_user_is_fatal(http_engine):
    need_root()
    if http_engine.kind != "user":
        pytest.skip("ktcp-httpd's option")
    r = subprocess.run([HTTPD_BIN, "--root", http_engine.root, "--port",
                        str(free_port()), "--user", "no-such-user-ktcp"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2
    assert "--user no-such-user-ktcp" in r.stderr, r.stderr


def test_kernel_refuses_root_credential(http_engine):
    if http_engine.kind != "kernel":
        pytest.skip("khttpd's parameters")
    with pytest.raises(Exception):
        with http_engine.spawn(user="root"):
            pass


# ---- dotfiles ----

HIDDEN = ["/.env", "/.git/config", "/.git/", "/.git", "/sub/.hidden",
          "/%2eenv", "/sub/../.env", "/.well-known/../.env",
          "/.well-known/.x"]


def test_dotfiles_are_404(http_engine):
    for path in HIDDEN:
        r = get(http_engine.port, path)
        assert r.status == 404, path
        assert b"SECRET_KEY" not in r.body and b"bare" not in r.body, path
    # the one exception
    r = get(http_engine.port, "/.well-known/security.txt")
    assert r.status == 200 and r.body.startswith(b"Contact:")
    r = get(http_engine.port, "/.well-known/")
    assert r.status == 200 and "security.txt" in r.body.decode()


def test_dotfiles_not_listed(http_engine):
    names = [n for n, _, _ in rows(get(http_engine.port, "/").body.decode())]
    assert ".env" not in names and ".git/" not in names, names
    assert ".well-known/" in names, names
    assert "a.txt" in names
    names = [n for n, _, _ in rows(get(http_engine.port, "/sub/").body.decode())]
    assert names == ["inner.txt"], names


def test_dotfiles_allowed(http_engine):
    assert get(http_engine.port, "/.env").status == 404  # by default
    with http_engine.spawn(dotfiles="allow") as srv:
        r = get(srv.port, "/.env")
        assert r.status == 200 and r.body == b"SECRET_KEY=dotenv\n"
        assert get(srv.port, "/sub/.hidden").status == 200
        assert get(srv.port, "/.git/config").status == 200
        names = [n for n, _, _ in rows(get(srv.port, "/sub/").body.decode())]
        assert sorted(names) == [".hidden", "inner.txt"], names


# ---- listings ----

def test_listing_sorted_with_sizes_and_mtimes(http_engine):
    r = get(http_engine.port, "/sorted/")
    assert r.status == 200
    got = rows(r.body.decode("utf-8"))
    want = sorted([(n, str(len(data)), email.utils.formatdate(m, usegmt=True))
                   for n, (data, m) in SORTED.items()] +
                  [(n + "/", "-", email.utils.formatdate(m, usegmt=True))
                   for n, m in SORTED_DIRS.items()],
                  key=lambda row: row[0].encode())
    assert got == want


def test_listing_whose_title_exceeds_a_piece(http_engine):
    target = "/" + LONG_DIR + "/"
    title = html.escape(target, quote=True)
    assert len(title) * 2 > 16384  # more than a piece (HTTP_SERVER_LISTING_BUF)
    for version in ("1.1", "1.0"):
        with Conn(http_engine.port) as c:
            c.send(f"GET {target} HTTP/{version}\r\nHost: x\r\n\r\n".encode())
            r = c.read_response()
        assert r.status == 200, version
        text = r.body.decode()
        assert text.startswith("<!DOCTYPE html>"), version
        assert text.count(f"Index of {title}") == 2, version
        assert [n for n, _, _ in rows(text)] == ["x.txt"], version
        assert text.rstrip().endswith("</html>"), version
    assert get(http_engine.port, target + "x.txt").body == b"deep\n"
    assert LONG_SEGMENT in LONG_DIR


def test_listing_bounded(http_engine):
    r = get(http_engine.port, "/crowded/")
    assert r.status == 200
    text = r.body.decode()
    names = [n for n, _, _ in rows(text)]
    assert len(names) == LISTING_MAX_ENTRIES < CROWDED
    assert names == sorted(names)
    assert f"Only the first {LISTING_MAX_ENTRIES} entries are listed." in text
    assert text.rstrip().endswith("</html>")
