"""Address rules and request rates on every HTTP engine: ktcp-httpd's
--allow/--deny/--limit-req in each model on the host, khttpd.ko's acl=,
rate=, burst=, rate_entries= in the VM (unbound and kthread).

Rules: the first rule matching a client decides, none matching serves it;
a denied client is closed at accept, before a byte is read (no answer at
all), and counted as denied; an IPv4 rule matches an IPv4 client
whichever socket it came through (IPv4-mapped IPv6 on a dual-stack one),
an IPv6 rule only IPv6 clients. A malformed CIDR or rate stops the start:
ktcp-httpd exits 2 naming it, khttpd's load fails.

Rates (nginx's limit_req with nodelay): an address sends burst + 1
requests at once, the next gets 429 with Retry-After while another
address is served, and one more passes once the rate has refilled it; a
flood of new addresses never grows the table past its size.

In the VM (software emulation, each load a few seconds) the tests whose
subject is core's parsing or the table, not the connection's path
(IPv6 rules, malformed input, the flood), run on khttpd unbound only;
the others on unbound and kthread.
"""
import os
import re
import signal
import subprocess
import time

import pytest

from testlib import BUILD, module_path, require_kind, run, served_config
from test_conn_per_ip import UserServed
from test_kernel_modules import Served

USER = [f"ktcp-httpd-{model}" for model in ("threads", "epoll", "mn")]
KERNEL = ["khttpd", "khttpd-kthread"]

BAD = ["10.0.0.0/33", "1.2.3", "::g/64", "10.0.0.0/8x", "10.0.0.1/8", "::/129"]
BAD_RATES = ["0r/s", "10r/h", "10", "1000001r/s"]


@pytest.fixture(params=USER + KERNEL)
def engine(request, tmp_path):
    """start(rules, ipv6=False): the engine with the rules [("allow"|"deny",
    CIDR), ...] in order, serving IPv4 clients (user engines on a
    dual-stack socket, ::ffff:127.0.0.1, so IPv4 clients arrive as
    IPv4-mapped IPv6) or ::1."""
    started = []
    user = request.param in USER
    require_kind("user" if user else "kernel")

    def start(rules, ipv6=False, limit=None, proxy=False, **params):
        """limit: (rate, burst, entries) of --limit-req / rate=."""
        if user:
            args = [a for verb, cidr in rules for a in ("--" + verb, cidr)]
            if limit:
                args += ["--limit-req", "rate=%s,burst=%d,entries=%d" % limit]
            args += ["--proxy-protocol"] if proxy else []
            m = UserServed(request.param, tmp_path, args=args,
                           bind="::1" if ipv6 else "::ffff:127.0.0.1",
                           host="::1" if ipv6 else "127.0.0.1", **params)
        else:
            if request.param.endswith("-kthread"):
                params["mode"] = "kthread"
            if rules:
                params["acl"] = ",".join(f"{verb}:{cidr}" for verb, cidr in rules)
            if limit:
                params.update(rate=limit[0], burst=limit[1], rate_entries=limit[2])
            if proxy:
                params["proxy_protocol"] = 1
            if ipv6:
                params["host"] = "::1"
            m = Served("khttpd", tmp_path, **params)
        started.append(m)
        return m

    start.user = user
    start.kthread = request.param.endswith("-kthread")
    yield start
    for m in started:
        m.stop()


def closed_unanswered(m, s):
    """True if the server closed s without a byte of answer."""
    try:
        s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_deny_one_address(engine):
    m = engine([("deny", "127.0.0.2")])
    with m.connect("127.0.0.1", source="127.0.0.2") as s:
        assert closed_unanswered(m, s), "127.0.0.2 was answered"
    with m.connect("127.0.0.1") as s:
        assert m.served(s), "127.0.0.1 was not served"
    assert m.counters()["denied"] >= 1


def test_rules_see_the_proxy_headers_client(engine):
    """On a PROXY protocol listener the rules decide on the client the
    header names, not on the balancer's address (127.0.0.1 here)."""
    m = engine([("deny", "192.0.2.66"), ("deny", "2001:db8::66")], proxy=True)
    for header, denied in ((b"PROXY TCP4 192.0.2.66 127.0.0.1 1000 80\r\n", True),
                           (b"PROXY TCP6 2001:db8::66 ::1 1000 80\r\n", True),
                           (b"PROXY TCP4 192.0.2.67 127.0.0.1 1000 80\r\n", False),
                           (b"PROXY UNKNOWN\r\n", False)):
        with m.connect("127.0.0.1") as s:
            s.sendall(header)
            if denied:
                assert closed_unanswered(m, s), header
            else:
                assert m.served(s), header
    if not engine.user:
        assert m.counters()["denied"] == 2


def test_first_match_wins_and_mapped_ipv4(engine):
    """allow 127.0.0.2, then deny 127.0.0.0/8: the first rule lets .2 in,
    the second closes .1, also when it arrives as ::ffff:127.0.0.1 from an
    IPv6 socket."""
    m = engine([("allow", "127.0.0.2"), ("allow", "127.0.0.9"),
                ("deny", "127.0.0.0/8")])
    with m.connect("127.0.0.1", source="127.0.0.2") as s:
        assert m.served(s), "127.0.0.2 was refused though its rule comes first"
    with m.connect("127.0.0.1") as s:
        assert closed_unanswered(m, s), "127.0.0.1 was answered"
    with m.connect("::ffff:127.0.0.1") as s:
        assert closed_unanswered(m, s), "::ffff:127.0.0.1 escaped the IPv4 rule"
    assert m.counters()["denied"] >= 2


def unbound_only(engine):
    if engine.kthread:
        pytest.skip("core's decision, the same in every mode: khttpd unbound runs it")


def test_ipv6_rules(engine):
    """An IPv6 rule matches ::1; an IPv4 one, even 0.0.0.0/0, does not."""
    unbound_only(engine)
    m = engine([("deny", "0.0.0.0/0"), ("deny", "::2/127"), ("allow", "all")],
               ipv6=True)
    with m.connect("::1") as s:
        assert m.served(s), "::1 was refused by an IPv4 rule"
    m.stop()
    m = engine([("allow", "::2"), ("deny", "::/64")], ipv6=True)
    with m.connect("::1") as s:
        assert closed_unanswered(m, s), "::1 was answered despite deny ::/64"


def test_malformed_cidr_refused_at_load(engine, tmp_path):
    unbound_only(engine)
    for bad in BAD if engine.user else BAD[:3] + BAD[4:5]:
        if engine.user:
            r = subprocess.run([os.path.join(BUILD, "ktcp-httpd"), "--root",
                                str(tmp_path), "--port", "1", "--allow",
                                "127.0.0.1", "--deny", bad],
                               capture_output=True, text=True, timeout=10)
            assert r.returncode == 2, (bad, r.returncode, r.stderr)
            assert f"--deny {bad}" in r.stderr, r.stderr
        else:
            run(["dmesg", "-C"])
            r = run(["insmod", module_path("khttpd"), f"root={tmp_path}",
                     f"acl=allow:127.0.0.1,deny:{bad}"], check=False)
            assert r.returncode != 0, f"khttpd loaded with acl deny:{bad}"
            assert f"acl=allow:127.0.0.1,deny:{bad}:" in run(["dmesg"]).stdout
    for bad in BAD_RATES if engine.user else BAD_RATES[1:2]:
        if engine.user:
            r = subprocess.run([os.path.join(BUILD, "ktcp-httpd"), "--root",
                                str(tmp_path), "--port", "1", "--limit-req",
                                f"rate={bad},burst=1"],
                               capture_output=True, text=True, timeout=10)
            assert r.returncode == 2, (bad, r.returncode, r.stderr)
            assert f"--limit-req rate={bad},burst=1" in r.stderr, r.stderr
        else:
            r = run(["insmod", module_path("khttpd"), f"root={tmp_path}",
                     f"rate={bad}"], check=False)
            assert r.returncode != 0, f"khttpd loaded with rate={bad}"
            assert f"rate={bad}:" in run(["dmesg"]).stdout


def pipelined(m, n, source=None, host="127.0.0.1"):
    """n GETs sent in one write (the last closes): their statuses, and the
    Retry-After of each 429."""
    reqs = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n" * (n - 1)
    reqs += b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with m.connect(host, source=source) as s:
        s.sendall(reqs)
        got = b""
        while (b := s.recv(65536)):
            got += b
    statuses = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    waits = [int(x) for x in re.findall(rb"\r\nRetry-After: (\d+)\r\n", got)]
    return statuses, waits


def test_rate_burst_then_429_then_refill(engine):
    """rate 1r/s, burst 2: three at once pass, the fourth is 429 with
    Retry-After: 1 while 127.0.0.2 is served; a second later one more
    passes (and the one right after it does not)."""
    m = engine([], limit=("1r/s", 2, 64))
    statuses, waits = pipelined(m, 4)
    assert statuses == [200, 200, 200, 429], statuses
    assert waits == [1], waits
    statuses, _ = pipelined(m, 1, source="127.0.0.2")
    assert statuses == [200], "127.0.0.2 was limited with 127.0.0.1"
    time.sleep(1.2)
    statuses, waits = pipelined(m, 2)
    assert statuses == [200, 429], statuses
    c = m.counters()
    assert c["rate_limited"] >= 2 and c["rate_entries"] >= 2, c


def test_rate_429_has_the_custom_page(engine, tmp_path):
    """An error page for 429 (--error-page 429=/slow.html, khttpd
    error_pages=) answers a limited request with the page's bytes and
    type, still a 429 with Retry-After, on a connection that goes on."""
    page = b"<!doctype html><title>Slow down</title><p>Too many requests.\n"
    (tmp_path / "slow.html").write_bytes(page)
    (tmp_path / "slow.html").chmod(0o644)
    if engine.user:
        m = engine([], limit=("1r/s", 0, 64), error_page="429=/slow.html")
    else:
        m = engine([], limit=("1r/s", 0, 64), error_pages="429=/slow.html")
    req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"
    with m.connect("127.0.0.1") as s:
        s.sendall(req * 2 + req.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        got = b""
        while (b := s.recv(65536)):
            got += b
    parts = re.split(rb"(?=HTTP/1\.1 \d{3} )", got)[1:]
    assert [p[9:12] for p in parts] == [b"200", b"429", b"429"], got
    for limited in parts[1:]:
        head, body = limited.split(b"\r\n\r\n", 1)
        assert b"\r\nRetry-After: 1\r\n" in head, head
        assert b"\r\nContent-Type: text/html" in head, head
        assert body == page, body


def test_rate_table_bounded(engine):
    """A flood of 256 new addresses through a table of 64: each is served
    (new entries take the place of the oldest), the table holds 64."""
    unbound_only(engine)
    m = engine([], limit=("1r/s", 0, 64))
    for i in range(256):
        src = f"127.1.{1 + i // 200}.{1 + i % 200}"
        statuses, _ = pipelined(m, 1, source=src)
        assert statuses == [200], (src, statuses)
    statuses, _ = pipelined(m, 2, source="127.0.0.1")
    assert statuses == [200, 429], statuses
    assert m.counters()["rate_entries"] == 64


def test_rules_reload_on_sighup(tmp_path):
    """ktcp-httpd: a SIGHUP reads --config's rules again; connections are
    checked against the new list from then on."""
    require_kind("user")
    with served_config("deny 127.0.0.2\n", "ktcp-acl-") as conf:
        reload_rules(tmp_path, conf)


def reload_rules(tmp_path, conf):
    m = UserServed("ktcp-httpd-epoll", tmp_path, args=["--config", str(conf)])
    try:
        with m.connect("127.0.0.1", source="127.0.0.2") as s:
            assert closed_unanswered(m, s)
        conf.write_text("allow 127.0.0.2\ndeny all\n")
        m.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            with m.connect("127.0.0.1", source="127.0.0.2") as s:
                if m.served(s):
                    break
            assert time.monotonic() < deadline, "the reload did not let 127.0.0.2 in"
            time.sleep(0.1)
        with m.connect("127.0.0.1") as s:
            assert closed_unanswered(m, s), "deny all did not close 127.0.0.1"
        assert m.counters(source="127.0.0.2")["denied"] >= 2
        # rates too: on at a reload
        conf.write_text("allow 127.0.0.2\ndeny all\nlimit-req rate=1r/s\n")
        m.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while pipelined(m, 2, source="127.0.0.2")[0] != [200, 429]:
            assert time.monotonic() < deadline, "the reload did not limit rates"
            time.sleep(1.1)
        conf.write_text("deny 127.0.0.0/8x\n")  # a bad file keeps the rules
        m.proc.send_signal(signal.SIGHUP)
        time.sleep(1.2)  # and 127.0.0.2's next request is due
        with m.connect("127.0.0.1", source="127.0.0.2") as s:
            assert m.served(s)
    finally:
        m.stop()
    assert "--deny 127.0.0.0/8x" in m.proc.stderr.read()
