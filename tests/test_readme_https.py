"""The README's HTTPS quick start, its three commands run exactly as
written (in a scratch folder holding the tree's build/ and docs/), on the
host: a self-signed certificate, ktcp-httpd on 8080 and 8443, curl trusting
that certificate."""
import os
import signal
import subprocess
import time

import pytest

from testlib import ROOT, port_free, readme_commands, require_kind, start_background, wait_port


def quick_start():
    return readme_commands("## HTTPS", 3)


def test_readme_https_quick_start(tmp_path):
    require_kind("user")
    make_cert, serve, fetch = quick_start()
    for port in (8080, 8443):
        if not port_free(port):
            pytest.skip(f"port {port}, which the README's commands use, is taken here")
    os.symlink(os.path.join(ROOT, "build"), tmp_path / "build")
    os.symlink(os.path.join(ROOT, "docs"), tmp_path / "docs")
    subprocess.run(["bash", "-c", make_cert], cwd=tmp_path, check=True, timeout=60,
                   capture_output=True)
    pid = start_background(serve, tmp_path)
    try:
        wait_port(8443, timeout=20)
        r = subprocess.run(["bash", "-c", fetch], cwd=tmp_path, timeout=60,
                           capture_output=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout == open(os.path.join(ROOT, "docs", "tls.md"), "rb").read()
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
