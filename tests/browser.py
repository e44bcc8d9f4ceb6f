"""Headless Chromium (Debian's chromium, scripts/deps) as a test's browser:
a page loaded over HTTPS from a test server whose CA the browser trusts
the way a person's does (an NSS database in a temporary HOME with the CA
added: certutil, libnss3-tools), not by skipping the check. Every run is
bounded; the profile and HOME are the caller's temporary folder.

    b = Browser(ca_pem, tmp_path)
    dom = b.dump_dom(url)             # the page's DOM after it loaded
    dom = b.dump_dom(url, wait_ms=5000)  # ... and its scripts' fetches
    png = b.screenshot(url, path)     # a PNG of the window
    ink(png)                          # share of pixels that are not white
"""
import os
import shutil
import signal
import struct
import subprocess
import zlib


def chromium_path():
    return shutil.which("chromium")


class Browser:
    def __init__(self, ca_pem, folder, width=1000, height=700):
        if not chromium_path():
            raise AssertionError("chromium is not installed (scripts/deps installs it)")
        if not shutil.which("certutil"):
            raise AssertionError("certutil is not installed (libnss3-tools, scripts/deps)")
        self.home = os.path.join(str(folder), "home")
        self.size = (width, height)
        nssdb = os.path.join(self.home, ".pki", "nssdb")
        os.makedirs(nssdb, exist_ok=True)
        db = f"sql:{nssdb}"
        self._run(["certutil", "-N", "-d", db, "--empty-password"])
        # "C,,": a CA trusted to issue server certificates
        self._run(["certutil", "-A", "-d", db, "-n", "ktcp test CA", "-t", "C,,", "-i", ca_pem])

    def _run(self, argv, timeout=60):
        """argv in a session of its own: what it leaves behind (Chromium's
        helper processes) is killed with it, so none outlives the test or
        holds its output open."""
        env = dict(os.environ, HOME=self.home)
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise AssertionError(f"{argv[0]} did not finish within {timeout} s")
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if p.returncode != 0:
            raise AssertionError(f"{argv[0]} exited {p.returncode}: "
                                 f"{err.decode(errors='replace')[-2000:]}")
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def _chromium(self, url, *action, timeout=90):
        profile = os.path.join(self.home, "profile")
        argv = [chromium_path(), "--headless", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-dev-shm-usage", "--disable-breakpad", f"--user-data-dir={profile}",
                f"--window-size={self.size[0]},{self.size[1]}", "--hide-scrollbars"]
        if os.geteuid() == 0:
            argv.append("--no-sandbox")  # Chromium refuses to run as root with it
        return self._run(argv + list(action) + [url], timeout=timeout)

    def dump_dom(self, url, wait_ms=0):
        """The DOM after the page loaded, as HTML text; with wait_ms, after
        the page's own requests (a script's fetch) settled too, within that
        much of the browser's virtual time."""
        extra = [f"--virtual-time-budget={wait_ms}"] if wait_ms else []
        return self._chromium(url, *extra, "--dump-dom").stdout.decode(errors="replace")

    def screenshot(self, url, path):
        """A PNG of the window at url, written to path."""
        self._chromium(url, f"--screenshot={path}")
        if not os.path.exists(path):
            raise AssertionError(f"chromium wrote no screenshot to {path}")
        return path


def png_pixels(path):
    """(width, height, rows): an 8-bit RGB or RGBA PNG decoded with zlib,
    each row a bytes of width * channels."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    width, height, depth, color, _, _, interlace = hdr
    assert depth == 8 and color in (2, 6) and interlace == 0, hdr
    ch = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * ch
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, ch, rows


def ink(path):
    """The share (0..1) of a PNG's pixels that are not near white: 0 for a
    blank page."""
    width, height, ch, rows = png_pixels(path)
    dark = 0
    for row in rows:
        for x in range(0, width * ch, ch):
            if min(row[x], row[x + 1], row[x + 2]) < 200:
                dark += 1
    return dark / (width * height)
