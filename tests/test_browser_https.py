"""A real browser over HTTPS: headless Chromium (Debian's chromium) loads a
directory listing from ktcp-httpd's TLS port with the test CA trusted the
way a person's browser trusts one (in the NSS database of its HOME, not
by skipping the check: tests/browser.py), and the page is seen: its title
and names in the DOM after loading, and a screenshot that is not blank. The
same browser without the CA gets no listing. Host only (ktcp-httpd, epoll:
the models share the TLS code that the suite runs in each)."""
import os

import pytest

from browser import Browser, ink
from engines import UserHttpd, tlscert
from testlib import require_kind

NAMES = ["alpha.txt", "beta.html", "gamma.bin"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_kind("user")
    root = tmp_path_factory.mktemp("www")
    pub = root / "pub"
    pub.mkdir()
    for n in NAMES:
        (pub / n).write_bytes(b"x" * 100)
    for p in [root, pub] + list(pub.iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    e = UserHttpd("epoll", str(tmp_path_factory.mktemp("log")), tls=True).start(str(root))
    try:
        yield e
    finally:
        e.stop()


def test_chromium_loads_a_listing_over_https(server, tmp_path):
    url = f"https://localhost:{server.port}/pub/"
    b = Browser(tlscert.TLS_PORTS[server.port], tmp_path / "trusted")
    dom = b.dump_dom(url)
    assert "<title>Index of /pub/</title>" in dom, dom[-2000:]
    for n in NAMES:
        assert f">{n}</a>" in dom, (n, dom[-2000:])
    png = b.screenshot(url, str(tmp_path / "listing.png"))
    share = ink(png)
    # black text and blue links on white: a few per cent of the window;
    # a blank page is 0, an error page's colour fills much of it
    assert 0.002 < share < 0.3, share
    # Without the CA in its database the browser shows no listing.
    os.makedirs(tmp_path / "untrusted", exist_ok=True)
    plain = Browser.__new__(Browser)
    plain.home, plain.size = str(tmp_path / "untrusted"), b.size
    assert "Index of /pub/" not in plain.dump_dom(url)
