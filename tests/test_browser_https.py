"""A real browser over HTTPS: headless Chromium (Debian's chromium) loads a
directory listing from ktcp-httpd's TLS port with the test CA trusted the
way a person's browser trusts one (in the NSS database of its HOME, not
by skipping the check: tests/browser.py), and the page is seen: its title
and names in the DOM after loading, and a screenshot that is not blank. The
same browser without the CA gets no listing. A script on one HTTPS server
fetching from another goes through the browser's CORS preflight, allowed
or refused by the second server's --cors. Host only (ktcp-httpd, epoll:
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


PAGE = """<!doctype html><title>cors</title><p id="out">pending</p>
<script>
fetch("https://localhost:%d/api/data.json", {headers: {"X-Token": "t1"}})
  .then(r => r.text())
  .then(t => { document.getElementById("out").textContent = "got " + t.trim(); })
  .catch(e => { document.getElementById("out").textContent = "blocked"; });
</script>
"""


@pytest.mark.parametrize("allowed", [True, False], ids=["allowed", "refused"])
def test_chromium_cors_preflight(tmp_path, allowed):
    """A page from one HTTPS server (https://localhost:A) fetches JSON from
    another (https://localhost:B) with a custom request field, so the
    browser asks B first with a CORS preflight (OPTIONS with
    Access-Control-Request-Method and -Headers). B started with --cors
    naming A's origin answers the preflight and the GET, and the script
    reads the body; B naming another origin gets the preflight refused by
    the browser and no GET is ever sent. B's access log shows both."""
    require_kind("user")
    site, api = tmp_path / "site", tmp_path / "api"
    (api / "api").mkdir(parents=True)
    (api / "api" / "data.json").write_text('{"n": 42}\n')
    site.mkdir()
    for p in [tmp_path, site, api, api / "api"]:
        p.chmod(0o755)
    (api / "api" / "data.json").chmod(0o644)
    logs = tmp_path / "log"
    logs.mkdir()
    a = UserHttpd("epoll", str(logs), tls=True).start(str(site))
    try:
        origin = f"https://localhost:{a.port}" if allowed else "https://other.example"
        access = logs / "api-access.log"
        b = UserHttpd("epoll", str(logs), tls=True).start(str(api), cors=origin,
                                                          access_log=str(access))
        try:
            (site / "page.html").write_text(PAGE % b.port)
            (site / "page.html").chmod(0o644)
            br = Browser(tlscert.TLS_PORTS[a.port], tmp_path / "browser")
            dom = br.dump_dom(f"https://localhost:{a.port}/page.html", wait_ms=5000)
        finally:
            b.stop()  # flushes the access log
        log = access.read_text()
    finally:
        a.stop()
    assert "OPTIONS /api/data.json" in log, log
    if allowed:
        assert '<p id="out">got {"n": 42}</p>' in dom, dom[-2000:]
        assert "GET /api/data.json" in log, log
    else:
        assert '<p id="out">blocked</p>' in dom, dom[-2000:]
        assert "GET /api/data.json" not in log, log
