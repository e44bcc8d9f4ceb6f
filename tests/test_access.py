"""Address rules on every HTTP engine: ktcp-httpd's --allow/--deny in each
model on the host, khttpd.ko's acl= in the VM (unbound and kthread). The
first rule matching a client decides, none matching serves it; a denied
client is closed at accept, before a byte is read (no answer at all), and
counted as denied; an IPv4 rule matches an IPv4 client whichever socket
it came through (IPv4-mapped IPv6 on a dual-stack one), an IPv6 rule
only IPv6 clients. A malformed CIDR stops the start: ktcp-httpd exits 2
naming it, khttpd's load fails.
"""
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from testlib import BUILD, module_path, require_kind, run
from test_conn_per_ip import UserServed
from test_kernel_modules import Served

USER = [f"ktcp-httpd-{model}" for model in ("threads", "epoll", "mn")]
KERNEL = ["khttpd", "khttpd-kthread"]

BAD = ["10.0.0.0/33", "1.2.3", "::g/64", "10.0.0.0/8x", "10.0.0.1/8", "::/129"]


@pytest.fixture(params=USER + KERNEL)
def engine(request, tmp_path):
    """start(rules, ipv6=False): the engine with the rules [("allow"|"deny",
    CIDR), ...] in order, serving IPv4 clients (user engines on a
    dual-stack socket, ::ffff:127.0.0.1, so IPv4 clients arrive as
    IPv4-mapped IPv6) or ::1."""
    started = []
    user = request.param in USER
    require_kind("user" if user else "kernel")

    def start(rules, ipv6=False, **params):
        if user:
            args = [a for verb, cidr in rules for a in ("--" + verb, cidr)]
            m = UserServed(request.param, tmp_path, args=args,
                           bind="::1" if ipv6 else "::ffff:127.0.0.1",
                           host="::1" if ipv6 else "127.0.0.1", **params)
        else:
            if request.param.endswith("-kthread"):
                params["mode"] = "kthread"
            params["acl"] = ",".join(f"{verb}:{cidr}" for verb, cidr in rules)
            if ipv6:
                params["host"] = "::1"
            m = Served("khttpd", tmp_path, **params)
        started.append(m)
        return m

    start.user = user
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


def test_ipv6_rules(engine):
    """An IPv6 rule matches ::1; an IPv4 one, even 0.0.0.0/0, does not."""
    m = engine([("deny", "0.0.0.0/0"), ("deny", "::2/127"), ("allow", "all")],
               ipv6=True)
    with m.connect("::1") as s:
        assert m.served(s), "::1 was refused by an IPv4 rule"
    m.stop()
    m = engine([("allow", "::2"), ("deny", "::/64")], ipv6=True)
    with m.connect("::1") as s:
        assert closed_unanswered(m, s), "::1 was answered despite deny ::/64"


def test_malformed_cidr_refused_at_load(engine, tmp_path):
    for bad in BAD:
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
    if not engine.user:
        r = run(["insmod", module_path("khttpd"), f"root={tmp_path}",
                 "acl=permit:127.0.0.1"], check=False)
        assert r.returncode != 0


def test_rules_reload_on_sighup(tmp_path):
    """ktcp-httpd: a SIGHUP reads --config's rules again; connections are
    checked against the new list from then on."""
    require_kind("user")
    # the server reads the file again as the user it serves as
    d = tempfile.mkdtemp(prefix="ktcp-acl-")
    os.chmod(d, 0o755)
    conf = pathlib.Path(d) / "ktcp-httpd.conf"
    conf.write_text("deny 127.0.0.2\n")
    conf.chmod(0o644)
    try:
        reload_rules(tmp_path, conf)
    finally:
        shutil.rmtree(d)


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
        conf.write_text("deny 127.0.0.0/8x\n")  # a bad file keeps the rules
        m.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        with m.connect("127.0.0.1", source="127.0.0.2") as s:
            assert m.served(s)
    finally:
        m.stop()
    assert "--deny 127.0.0.0/8x" in m.proc.stderr.read()
