"""The README's "Hosting a site" commands, run exactly as written (in a
scratch folder holding the tree's build/), on the host: a single-page
application's shell for a deep route with the added fields and CORS, a
browser's preflight answered 204, then the second site by its host name."""
import os
import signal
import subprocess
import time

import pytest

from testlib import ROOT, port_free, readme_commands, require_kind, start_background, wait_port


def commands():
    return readme_commands("## Hosting a site", 5)


def fields(head):
    return {k.strip().lower(): v.strip() for k, _, v in
            (line.partition(":") for line in head.split("\r\n")[1:]) if k}


def test_readme_hosting_a_site(tmp_path):
    require_kind("user")
    make_site, serve, route, preflight, blog = commands()
    if not port_free(8082):
        pytest.skip("port 8082, which the README's commands use, is taken here")
    os.symlink(os.path.join(ROOT, "build"), tmp_path / "build")
    subprocess.run(["bash", "-c", make_site], cwd=tmp_path, check=True, timeout=30)
    os.chmod(tmp_path, 0o755)
    for d in ("site", "site/app", "blog"):
        os.chmod(tmp_path / d, 0o755)
    os.chmod(tmp_path / "site/app/index.html", 0o644)
    os.chmod(tmp_path / "blog/index.html", 0o644)
    pid = start_background(serve, tmp_path)
    try:
        wait_port(8082, timeout=20)
        r = subprocess.run(["bash", "-c", route], cwd=tmp_path, timeout=30,
                           capture_output=True, check=True)
        head, _, body = r.stdout.decode().partition("\r\n\r\n")
        assert head.startswith("HTTP/1.1 200 OK"), head
        assert body == "<div id=app></div>\n"
        f = fields(head)
        assert f["access-control-allow-origin"] == "*"
        assert f["x-content-type-options"] == "nosniff"
        assert f["cache-control"] == "no-cache"
        r = subprocess.run(["bash", "-c", preflight], cwd=tmp_path, timeout=30,
                           capture_output=True, check=True)
        head = r.stdout.decode()
        assert head.startswith("HTTP/1.1 204 No Content"), head
        f = fields(head.partition("\r\n\r\n")[0])
        assert f["access-control-allow-methods"] == "GET, HEAD"
        assert f["access-control-allow-origin"] == "*"
        r = subprocess.run(["bash", "-c", blog], cwd=tmp_path, timeout=30,
                           capture_output=True, check=True)
        assert r.stdout == b"<h1>blog</h1>\n"
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
