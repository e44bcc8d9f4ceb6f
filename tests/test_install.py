"""make install / make uninstall into scratch trees: every binary, man page,
unit and example lands with the right mode, the units name the installed
binaries and pass `systemd-analyze verify`, the installed binaries run, and
uninstall takes everything away again."""
import os
import shutil
import stat
import subprocess

import pytest

from testlib import ROOT

BINS = ["ktcp-httpd", "ktcp-echo", "ktcp-kcm-server", "ktcp-msg-server", "ktcp-tlsd",
        "htstress", "echo-bench", "lat", "msg-bench"]
UNITS = ["ktcp-httpd.service", "ktcp-httpd.socket", "ktcp-khttpd.service", "ktcp-tlsd.service"]


def make(*args):
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def files_under(top):
    return sorted(os.path.relpath(os.path.join(d, f), top)
                  for d, _, fs in os.walk(top) for f in fs)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_install_into_destdir_and_uninstall(tmp_path):
    dest = tmp_path / "dest"
    make("install", f"DESTDIR={dest}", "PREFIX=/usr")
    want = sorted([f"usr/bin/{b}" for b in BINS]
                  + [f"usr/share/man/man1/{b}.1" for b in BINS]
                  + [f"usr/lib/systemd/system/{u}" for u in UNITS]
                  + ["etc/ktcp-httpd.conf", "etc/logrotate.d/ktcp-httpd",
                     "usr/lib/sysusers.d/ktcp-httpd.conf",
                     "usr/share/doc/ktcp/README.md", "usr/share/doc/ktcp/LICENSE",
                     "usr/share/doc/ktcp/examples/modprobe.d/khttpd.conf"])
    assert files_under(dest) == want
    for b in BINS:
        assert mode(dest / "usr/bin" / b) == 0o755
        page = (dest / "usr/share/man/man1" / f"{b}.1").read_text()
        assert page.startswith(".\\\"") and f'.TH {b.upper()} "1"' in page
        assert ".SH NAME" in page and "\\-\\-version" in page
    for u in UNITS:
        path = dest / "usr/lib/systemd/system" / u
        assert mode(path) == 0o644
        text = path.read_text()
        assert "@BINDIR@" not in text and "@DOCDIR@" not in text and "@SYSCONFDIR@" not in text
        kind = "[Socket]" if u.endswith(".socket") else "[Service]"
        for section in ("[Unit]", kind, "[Install]"):
            assert section in text
    httpd_unit = (dest / "usr/lib/systemd/system/ktcp-httpd.service").read_text()
    assert "ExecStart=/usr/bin/ktcp-httpd --config /etc/ktcp-httpd.conf" in httpd_unit
    assert (dest / "etc/ktcp-httpd.conf").read_text() == open(os.path.join(ROOT, "dist/ktcp-httpd.conf")).read()
    assert "options khttpd root=" in (dest / "usr/share/doc/ktcp/examples/modprobe.d/khttpd.conf").read_text()
    out = subprocess.run([str(dest / "usr/bin/ktcp-httpd"), "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("ktcp-httpd ") and open(os.path.join(ROOT, "VERSION")).read().strip() in out

    make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr")
    assert files_under(dest) == []


def test_installed_units_verify(tmp_path):
    """With PREFIX pointing at a real tree the units' ExecStart exist, so
    systemd's own checker can judge them."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}", "SYSUSERS=no")  # no user made on this machine
    for u in UNITS:
        r = subprocess.run(["systemd-analyze", "verify", "--man=no",
                            str(prefix / "lib/systemd/system" / u)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    assert f"ExecStart={prefix}/bin/ktcp-httpd " in (prefix / "lib/systemd/system/ktcp-httpd.service").read_text()
    make("uninstall", f"PREFIX={prefix}")
    assert files_under(prefix) == []


@pytest.mark.parametrize("binary", BINS)
def test_every_binary_has_version(binary):
    r = subprocess.run([os.path.join(ROOT, "build", binary), "--version"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    version = open(os.path.join(ROOT, "VERSION")).read().strip()
    assert r.stdout.startswith(f"{binary} {version}"), r.stdout
    assert "--version" in subprocess.run([os.path.join(ROOT, "build", binary), "--help"],
                                         capture_output=True, text=True, timeout=10).stdout
